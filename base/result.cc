#include "base/result.h"

#include <cerrno>
#include <cstring>

namespace ekco::base {

std::string_view errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kUnknown:
      return "Unknown";
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kAlreadyExists:
      return "AlreadyExists";
    case ErrorCode::kPermissionDenied:
      return "PermissionDenied";
    case ErrorCode::kUnauthenticated:
      return "Unauthenticated";
    case ErrorCode::kConflict:
      return "Conflict";
    case ErrorCode::kGone:
      return "Gone";
    case ErrorCode::kTooManyRequests:
      return "TooManyRequests";
    case ErrorCode::kUnavailable:
      return "Unavailable";
    case ErrorCode::kTimeout:
      return "Timeout";
    case ErrorCode::kEscape:
      return "Escape";
    case ErrorCode::kIo:
      return "Io";
    case ErrorCode::kParse:
      return "Parse";
    case ErrorCode::kCancelled:
      return "Cancelled";
  }
  return "Unknown";
}

Error errnoError(std::string_view context, int err) {
  ErrorCode code = ErrorCode::kIo;
  switch (err) {
    case ENOENT:
      code = ErrorCode::kNotFound;
      break;
    case EEXIST:
      code = ErrorCode::kAlreadyExists;
      break;
    case EACCES:
    case EPERM:
      code = ErrorCode::kPermissionDenied;
      break;
    case ETIMEDOUT:
      code = ErrorCode::kTimeout;
      break;
    case EINVAL:
    case ENOTDIR:
    case EISDIR:
      code = ErrorCode::kInvalidArgument;
      break;
    case EXDEV:
      code = ErrorCode::kEscape;
      break;
    default:
      break;
  }
  return Error(std::string(context) + ": " + std::strerror(err), code);
}

}  // namespace ekco::base
