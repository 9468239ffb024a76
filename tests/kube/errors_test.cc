#include "kube/errors.h"

#include <gtest/gtest.h>

#include <string>

namespace ekco::kube {
namespace {

using base::ErrorCode;

std::string statusBody(int code, const std::string& reason, const std::string& message) {
  return R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")" +
         message + R"(","reason":")" + reason +
         R"(","details":{"name":"node-a","kind":"nodes"},"code":)" + std::to_string(code) + "}";
}

TEST(ApiError, NotFoundCarriesTheServersMessageReasonAndCode) {
  const auto error = apiError(
      "get nodes/node-a",
      {.status = 404, .body = statusBody(404, "NotFound", R"(nodes \"node-a\" not found)")});
  EXPECT_EQ(error.code(), ErrorCode::kNotFound);
  EXPECT_EQ(error.message(), R"(get nodes/node-a: nodes "node-a" not found (NotFound, 404))");
}

// Found with tests/fuzz/list_watch_fuzz.cc's one-line check (a watch ERROR event): the message
// was flattened, the reason was not.
TEST(ApiError, TheReasonIsFlattenedToo) {
  const auto error =
      statusError("watch pods", {.message = "m\n", .reason = "Ex\x1bpired\n", .code = 410});
  EXPECT_EQ(error.code(), ErrorCode::kGone);  // from the code: the reason is not "Expired"
  EXPECT_EQ(error.message(), "watch pods: m (Ex?pired, 410)");
}

TEST(ApiError, MapsEveryHttpStatusToItsCode) {
  const struct {
    int status;
    const char* reason;
    ErrorCode code;
  } cases[] = {
      {400, "BadRequest", ErrorCode::kInvalidArgument},
      {401, "Unauthorized", ErrorCode::kUnauthenticated},
      {403, "Forbidden", ErrorCode::kPermissionDenied},
      {404, "NotFound", ErrorCode::kNotFound},
      {409, "Conflict", ErrorCode::kConflict},
      {409, "AlreadyExists", ErrorCode::kAlreadyExists},
      {410, "Expired", ErrorCode::kGone},
      {410, "Gone", ErrorCode::kGone},
      {422, "Invalid", ErrorCode::kInvalidArgument},
      {429, "TooManyRequests", ErrorCode::kTooManyRequests},
      {500, "InternalError", ErrorCode::kUnavailable},
      {500, "ServerTimeout", ErrorCode::kTimeout},
      {502, "", ErrorCode::kUnavailable},
      {503, "ServiceUnavailable", ErrorCode::kUnavailable},
      {504, "Timeout", ErrorCode::kTimeout},
      {418, "", ErrorCode::kUnknown},
  };
  for (const auto& c : cases) {
    const auto error =
        apiError("op", {.status = c.status, .body = statusBody(c.status, c.reason, "m")});
    EXPECT_EQ(error.code(), c.code) << c.status << " " << c.reason;
  }
}

TEST(ApiError, TheHttpStatusWinsOverTheCodeInTheBody) {
  const auto error = apiError("op", {.status = 404, .body = statusBody(0, "", "gone")});
  EXPECT_EQ(error.code(), ErrorCode::kNotFound);
  EXPECT_EQ(error.message(), "op: gone (404)");
}

TEST(ApiError, AnHtmlBodyIsStillATypedErrorWithAnExcerpt) {
  const auto error =
      apiError("list pods", {.status = 502, .body = "<html>\n<body>Bad Gateway</body>\n</html>\n"});
  EXPECT_EQ(error.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(error.message(), "list pods: HTTP 502: <html> <body>Bad Gateway</body> </html>");
}

TEST(ApiError, GarbageBodiesAreTruncatedAndMadePrintable) {
  std::string garbage(5000, 'x');
  garbage[3] = '\0';
  garbage[4] = static_cast<char>(0xff);
  const auto error = apiError("get x", {.status = 500, .body = garbage});
  EXPECT_EQ(error.code(), ErrorCode::kUnavailable);
  EXPECT_LT(error.message().size(), kBodyExcerpt + 40);
  EXPECT_NE(error.message().find("xxx??xx"), std::string::npos) << error.message();
  EXPECT_EQ(error.message().substr(error.message().size() - 3), "...");
}

TEST(ApiError, ALongStatusMessageIsKeptWholeOnOneLine) {
  const std::string long_message(600, 'm');
  const auto error =
      apiError("update deployments/x",
               {.status = 422, .body = statusBody(422, "Invalid", long_message + "\\n" + "end")});
  EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error.message(), "update deployments/x: " + long_message + " end (Invalid, 422)");
}

TEST(ApiError, AnEmptyBodyNamesTheStatusOnly) {
  const auto error = apiError("delete pods/x in default", {.status = 403});
  EXPECT_EQ(error.code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(error.message(), "delete pods/x in default: HTTP 403");
}

TEST(ApiError, JsonThatIsNotAStatusIsTreatedAsABody) {
  const auto error = apiError("get x", {.status = 409, .body = R"({"kind":"Pod"})"});
  EXPECT_EQ(error.code(), ErrorCode::kConflict);
  EXPECT_EQ(error.message(), R"(get x: HTTP 409: {"kind":"Pod"})");
}

TEST(ParseStatus, ReadsMessageReasonCodeAndDetails) {
  const auto status = parseStatus(statusBody(410, "Expired", "too old resource version"));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->reason, "Expired");
  EXPECT_EQ(status->code, 410);
  EXPECT_EQ(status->message, "too old resource version");
  EXPECT_EQ(status->details_name, "node-a");
  EXPECT_EQ(status->details_kind, "nodes");
  EXPECT_FALSE(parseStatus("not json"));
  EXPECT_FALSE(parseStatus(R"({"kind":"Status","code":"not a number"})")->code);
}

TEST(ParseRetryAfter, AcceptsDeltaSecondsOnly) {
  EXPECT_EQ(parseRetryAfter("3"), std::chrono::seconds(3));
  EXPECT_EQ(parseRetryAfter(" 0 "), std::chrono::seconds(0));
  EXPECT_EQ(parseRetryAfter(""), std::nullopt);
  EXPECT_EQ(parseRetryAfter("-1"), std::nullopt);
  EXPECT_EQ(parseRetryAfter("1.5"), std::nullopt);
  EXPECT_EQ(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT"), std::nullopt);
}

}  // namespace
}  // namespace ekco::kube
