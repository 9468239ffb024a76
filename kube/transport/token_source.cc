#include "kube/transport/token_source.h"

#include <cctype>
#include <string>

#include "base/strings.h"

namespace ekco::kube {

TokenSource::TokenSource(std::string initial, std::string file, const hostfs::HostFs* fs,
                         const base::Clock& clock, std::chrono::seconds refresh)
    : file_(std::move(file)),
      fs_(fs),
      clock_(clock),
      refresh_(refresh),
      token_(std::move(initial)) {}

base::Result<std::string> readTokenFile(const hostfs::HostFs& fs, const std::string& path) {
  auto stat = fs.stat(path);
  if (stat && stat->size > kMaxTokenBytes) {
    return base::Error("read " + path + ": larger than " + base::describeBytes(kMaxTokenBytes) +
                           " (" + std::to_string(stat->size) + " bytes); not a token",
                       base::ErrorCode::kInvalidArgument);
  }
  auto text = fs.read(path);
  EKCO_TRY(text);
  std::string token = std::move(*text);
  if (token.size() > kMaxTokenBytes) {  // it grew between stat and read
    return base::Error("read " + path + ": larger than " + base::describeBytes(kMaxTokenBytes),
                       base::ErrorCode::kInvalidArgument);
  }
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
    token.pop_back();
  }
  return token;
}

std::string TokenSource::current() {
  std::lock_guard lock(mu_);
  if (file_.empty() || fs_ == nullptr) return token_;
  const base::MonoTime now = clock_.monoNow();
  if (read_once_ && now - read_at_ < refresh_) return token_;
  read_once_ = true;
  read_at_ = now;
  if (auto token = readTokenFile(*fs_, file_); token && !token->empty()) token_ = std::move(*token);
  return token_;
}

}  // namespace ekco::kube
