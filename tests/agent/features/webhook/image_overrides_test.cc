#include "agent/features/webhook/image_overrides.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/os/process.h"
#include "kube/transport/kubeconfig.h"
#include "tests/agent/process_support.h"

namespace ekco::agent::admission {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(EKCO_TESTDATA_DIR) + "/admission/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const ImageOverrides kOverrides = parseImageOverrides(
    {"projectcontour/contour:v1.18.0=myregistry.io/contour:v1.18.0-fips",
     "busybox:1.36=registry.local/busybox:1.36", "nginx:1.25=registry.local/nginx:1.25"});

// The response's AdmissionReview, checked for the invariants every answer has.
json responseOf(const ReviewOutcome& out, std::string_view api_version = "admission.k8s.io/v1") {
  json review = json::parse(out.response);
  EXPECT_EQ(review["apiVersion"], api_version);
  EXPECT_EQ(review["kind"], "AdmissionReview");
  EXPECT_EQ(review["response"]["uid"], out.uid);
  EXPECT_EQ(review["response"]["allowed"], true);
  return review["response"];
}

// The request's object with the response's patch applied, as the apiserver does.
json patchedObject(std::string_view body, const json& response) {
  json object = json::parse(body)["request"]["object"];
  if (!response.contains("patch")) return object;
  EXPECT_EQ(response["patchType"], "JSONPatch");
  auto patch = kube::base64Decode(response["patch"].get<std::string>());
  EXPECT_TRUE(patch.has_value());
  return object.patch(json::parse(*patch));
}

// A malformed request: allowed, unpatched, an error of one line.
void expectRefused(const ReviewOutcome& out, std::string_view reason,
                   std::string_view api_version = "admission.k8s.io/v1") {
  EXPECT_THAT(out.error, HasSubstr(std::string(reason)));
  EXPECT_EQ(out.error.find('\n'), std::string::npos);
  EXPECT_THAT(out.changes, IsEmpty());
  const json response = responseOf(out, api_version);
  EXPECT_FALSE(response.contains("patch"));
  EXPECT_FALSE(response.contains("patchType"));
}

TEST(ImageOverrides, ReplacesEveryExactMatchInContainersAndInitContainersOnCreate) {
  const std::string body = fixture("pod-create-v1.json");
  const ReviewOutcome out = reviewPod(body, kOverrides);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(out.operation, "CREATE");
  EXPECT_EQ(out.pod, "default/contour-*");
  ASSERT_EQ(out.changes.size(), 3u);
  const json pod = patchedObject(body, responseOf(out));
  EXPECT_EQ(pod["spec"]["initContainers"][0]["image"], "myregistry.io/contour:v1.18.0-fips");
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "myregistry.io/contour:v1.18.0-fips");
  EXPECT_EQ(pod["spec"]["containers"][1]["image"], "docker.io/envoyproxy/envoy:v1.18.3");
  EXPECT_EQ(pod["spec"]["containers"][2]["image"], "myregistry.io/contour:v1.18.0-fips");
  EXPECT_EQ(pod["spec"]["containers"][0]["args"], json::array({"serve"}));
}

TEST(ImageOverrides, ThePatchIsReplaceOperationsOnImagePathsOnly) {
  const ReviewOutcome out = reviewPod(fixture("pod-create-v1.json"), kOverrides);
  const json response = responseOf(out);
  const json patch = json::parse(*kube::base64Decode(response["patch"].get<std::string>()));
  ASSERT_EQ(patch.size(), 3u);
  EXPECT_EQ(patch[0], json({{"op", "replace"},
                            {"path", "/spec/containers/0/image"},
                            {"value", "myregistry.io/contour:v1.18.0-fips"}}));
  EXPECT_EQ(patch[2]["path"], "/spec/initContainers/0/image");
}

TEST(ImageOverrides, MatchesExactlyNotByPrefixTagOrRegistry) {
  const ImageOverrides o = parseImageOverrides({"nginx=registry.local/nginx"});
  for (const char* image : {"nginx:latest", "docker.io/nginx", "library/nginx", "nginx ", "NGINX",
                            "nginx@sha256:0000"}) {
    const std::string body =
        json({{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "u"},
                {"operation", "CREATE"},
                {"object", {{"spec", {{"containers", {{{"image", image}}}}}}}}}}})
            .dump();
    const ReviewOutcome out = reviewPod(body, o);
    EXPECT_EQ(out.error, "") << image;
    EXPECT_THAT(out.changes, IsEmpty()) << image;
    EXPECT_FALSE(responseOf(out).contains("patch")) << image;
  }
}

TEST(ImageOverrides, NoOverridesOrNoMatchAnswersAllowedWithoutAPatch) {
  const ReviewOutcome none = reviewPod(fixture("pod-create-v1.json"), {});
  EXPECT_EQ(none.error, "");
  EXPECT_FALSE(responseOf(none).contains("patch"));
}

TEST(ImageOverrides, OnUpdateLeavesImagesTheUpdateDoesNotChange) {
  // nginx:1.25 was already there (created before the override existed): a label change must
  // not swap it. busybox:1.36 is new in this update (and the new ephemeral container's).
  const std::string body = fixture("pod-update-v1.json");
  const ReviewOutcome out = reviewPod(body, kOverrides);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.pod, "shop/web-1");
  const json pod = patchedObject(body, responseOf(out));
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "nginx:1.25");
  EXPECT_EQ(pod["spec"]["containers"][1]["image"], "registry.local/busybox:1.36");
  EXPECT_EQ(pod["spec"]["ephemeralContainers"][0]["image"], "registry.local/busybox:1.36");
  EXPECT_EQ(out.changes.size(), 2u);
}

TEST(ImageOverrides, V1beta1IsAnsweredAllowedInItsOwnVersionWithTheUid) {
  const ReviewOutcome out = reviewPod(fixture("v1beta1.json"), kOverrides);
  EXPECT_EQ(out.uid, "b1");
  expectRefused(out, "v1beta1 is not served", "admission.k8s.io/v1beta1");
}

TEST(ImageOverrides, MalformedRequestsAreAllowedUnpatchedWithAOneLineError) {
  struct Case {
    const char* body;
    const char* error;
    const char* uid;
  };
  const Case cases[] = {
      {"", "not JSON", ""},
      {"not json at all", "not JSON", ""},
      {"{\"apiVersion\": \"admission.k8s.io/v1\", ", "not JSON", ""},
      {"[]", "a JSON array, not an AdmissionReview", ""},
      {"\"x\"", "a JSON string", ""},
      {"{}", "apiVersion is missing", ""},
      {R"({"apiVersion":7,"kind":"AdmissionReview","request":{"uid":"u"}})",
       "apiVersion is missing", "u"},
      {R"({"apiVersion":"v1","kind":"AdmissionReview","request":{"uid":"u"}})",
       "apiVersion is \"v1\"", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}})",
       "kind is not AdmissionReview", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", "request is missing",
       ""},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null})",
       "request is missing", ""},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":[1]})",
       "request is array", ""},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}})",
       "request.uid is missing", ""},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":12}})",
       "request.uid is number", ""},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}})",
       "request.uid is empty", ""},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}})",
       "request.object is missing", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":"pod"}})",
       "request.object is string", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},"object":{}}})",
       "request.kind is \"apps\"/\"Deployment\", not a core Pod", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":"Pod","object":{}}})",
       "request.kind is string", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"kind":"Service","spec":{}}}})",
       "request.object.kind is \"Service\", not Pod", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"kind":"Pod"}}})",
       "request.object.spec is missing", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"spec":[]}}})",
       "request.object.spec is array", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"spec":{"containers":{"image":"nginx:1.25"}}}}})",
       "spec.containers is object, not an array", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"spec":{"initContainers":["nginx:1.25"]}}}})",
       "spec.initContainers[0] is string", "u"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"spec":{"containers":[{"image":"nginx:1.25"},{"image":["nginx:1.25"]}]}}}})",
       "spec.containers[1].image is array", "u"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    const ReviewOutcome out = reviewPod(c.body, kOverrides);
    EXPECT_EQ(out.uid, c.uid);
    expectRefused(out, c.error);
  }
}

TEST(ImageOverrides, AWrongTypeLaterInThePodRefusesEvenAMatchBeforeIt) {
  // All or nothing: a half-patched pod is never sent.
  const ReviewOutcome out = reviewPod(
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"spec":{"containers":[{"image":"nginx:1.25"}],"initContainers":7}}}})",
      kOverrides);
  expectRefused(out, "spec.initContainers is number");
}

TEST(ImageOverrides, HostileValuesStayOutOfTheErrorLineAndTheResponseStaysJson) {
  const std::string body =
      "{\"apiVersion\":\"admission.k8s.io/v1\\n\\u001b[2J\",\"kind\":\"AdmissionReview\","
      "\"request\":{\"uid\":\"\\u0000\\n\\\"}\"}}";
  const ReviewOutcome out = reviewPod(body, kOverrides);
  EXPECT_EQ(out.uid, std::string("\0\n\"}", 4));
  expectRefused(out, "apiVersion is \"admission.k8s.io/v1\\n\\x1b[2J\"");
  for (char ch : out.error) EXPECT_GE(static_cast<unsigned char>(ch), 0x20);
}

TEST(ImageOverrides, InvalidUtf8AndDeepNestingAreRefusedNotCrashed) {
  expectRefused(reviewPod("{\"apiVersion\":\"\xff\xfe\"}", kOverrides), "not JSON");
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  expectRefused(reviewPod(deep, kOverrides), "nested deeper than 1000");
  const std::string deep_in_pod =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"spec":{"x":)" +
      std::string(5000, '[') + std::string(5000, ']') + "}}}}";
  const ReviewOutcome out = reviewPod(deep_in_pod, kOverrides);
  expectRefused(out, "nested deeper");
}

TEST(ImageOverrides, AHugeBodyWithinTheLimitIsPatchedAndOneOverItRefused) {
  // A pod with 2,000 containers and a 2 MiB annotation: within the apiserver's 3 MiB.
  json pod = {{"kind", "Pod"},
              {"metadata", {{"annotations", {{"big", std::string(2u << 20, 'a')}}}}},
              {"spec", {{"containers", json::array()}}}};
  for (int i = 0; i < 2000; ++i) {
    pod["spec"]["containers"].push_back(
        {{"name", "c" + std::to_string(i)}, {"image", i % 2 == 0 ? "nginx:1.25" : "other"}});
  }
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request", {{"uid", "big"}, {"operation", "CREATE"}, {"object", pod}}}};
  const std::string body = review.dump();
  ASSERT_LT(body.size(), kMaxReviewBytes);
  const ReviewOutcome out = reviewPod(body, kOverrides);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.changes.size(), 1000u);
  const json patched = patchedObject(body, responseOf(out));
  EXPECT_EQ(patched["spec"]["containers"][1998]["image"], "registry.local/nginx:1.25");
  EXPECT_EQ(patched["spec"]["containers"][1999]["image"], "other");

  review["request"]["object"]["metadata"]["annotations"]["big"] = std::string(3u << 20, 'a');
  const ReviewOutcome over = reviewPod(review.dump(), kOverrides);
  expectRefused(over, "over the 3 MiB limit");
}

// A review of just under 3 MiB (the apiserver's limit) made of `unit` repeated inside a pod.
std::string hostileReview(const std::string& head, const std::string& unit,
                          const std::string& tail) {
  std::string body =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",)"
      R"("operation":"CREATE","object":)" +
      head;
  while (body.size() + unit.size() + tail.size() < kMaxReviewBytes) body += unit;
  if (body.back() == ',') body.pop_back();
  return body + tail;
}

// kB from /proc/self/status.
long statusKb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string word;
  long kb = -1;
  while (in >> word) {
    if (word == key) in >> kb;
  }
  return kb;
}

// The hostile bodies, by shape: a long array of empty objects, of containers, of numbers, and
// one long string.
constexpr std::size_t kHostileShapes = 4;
std::string hostileBody(std::size_t shape) {
  switch (shape) {
    case 0:
      return hostileReview(R"({"spec":{"containers":[)", "{},", "]}}}}");
    case 1:
      return hostileReview(R"({"spec":{"containers":[)", R"({"image":"nginx:1.25"},)", "]}}}}");
    case 2:
      return hostileReview(R"({"metadata":{"annotations":{"n":[)", "0,",
                           R"(]}},"spec":{"containers":[{"image":"nginx:1.25"}]}}}})");
    default:
      return hostileReview(R"({"metadata":{"annotations":{"a":")", "a",
                           R"("}},"spec":{"containers":[{"image":"nginx:1.25"}]}}}})");
  }
}

constexpr const char* kProbeShape = "EKCO_HOSTILE_REVIEW_SHAPE";
constexpr const char* kTestName = "ImageOverrides.AHostile3MiBBodyIsReviewedInBoundedMemory";

// Issue 34: a DOM of a hostile body took ~20 times its size (3 MiB of "{}," was ~60 MiB), and
// eight such reviews at once killed the agent. The review keeps only what it decides on: its
// memory is the body plus its parser's buffers for the longest string (the server reserves 6x
// the body for it; webhookRequestCost).
// Each shape is measured in a process of its own (this test run again with kProbeShape set), as
// the growth of its peak RSS over its RSS (clear_refs resets the peak), under whatever allocator
// the build uses, with ASan's quarantine cut as the agent's RSS tests do (asanOptionsForRss): by
// default it holds every buffer the parser's doublings freed.
TEST(ImageOverrides, AHostile3MiBBodyIsReviewedInBoundedMemory) {
  if (const char* shape = std::getenv(kProbeShape); shape != nullptr) {
    const std::string body = hostileBody(std::stoul(shape));
    std::ofstream("/proc/self/clear_refs") << "5";
    const long before = statusKb("VmRSS:");
    const ReviewOutcome out = reviewPod(body, kOverrides);
    const long grew = statusKb("VmHWM:") - before;
    std::printf("hostile-review-probe size=%zu grew=%ld answered=%d\n", body.size(), grew,
                out.response.empty() ? 0 : 1);
    return;
  }
  base::SystemClock clock;
  base::BoostProcessRunner runner(clock);
  for (std::size_t i = 0; i < kHostileShapes; ++i) {
    SCOPED_TRACE(i);
    auto run = runner.run(base::ProcessRequest{
        .argv = {"/proc/self/exe", std::string("--gtest_filter=") + kTestName},
        .inherit_env = true,
        .env = {{kProbeShape, std::to_string(i)}, {"ASAN_OPTIONS", testing::asanOptionsForRss()}},
        .timeout = std::chrono::minutes(2)});
    ASSERT_TRUE(run) << run.error().message();
    ASSERT_TRUE(run->success()) << run->stdout_data << run->stderr_data;
    std::size_t size = 0;
    long grew = -1;
    int answered = 0;
    const std::size_t line = run->stdout_data.find("hostile-review-probe ");
    ASSERT_NE(line, std::string::npos) << run->stdout_data;
    ASSERT_EQ(
        std::sscanf(run->stdout_data.c_str() + line,
                    "hostile-review-probe size=%zu grew=%ld answered=%d", &size, &grew, &answered),
        3)
        << run->stdout_data;
    EXPECT_LE(size, kMaxReviewBytes);
    EXPECT_EQ(answered, 1);
    // 6x the body, as the server reserves, plus the allocator's slack.
    EXPECT_LT(grew, 6 * 3 * 1024 + 4 * 1024) << "the review grew the RSS by " << grew << " kB";
    std::printf("shape %zu: the review grew the RSS by %ld kB\n", i, grew);
  }
}

TEST(ImageOverrides, ARepeatedKeyCountsAsItsLastValueAsInADom) {
  const std::string body =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",)"
      R"("object":{"spec":{"containers":[{"image":"nginx:1.25","image":"other"},{"image":"x"}]},)"
      R"("spec":{"containers":[{"image":"x"},{"image":"busybox:1.36"}],)"
      R"("containers":[{"image":"nginx:1.25"},{"image":"x","image":"busybox:1.36"}]}}}})";
  const ReviewOutcome out = reviewPod(body, kOverrides);
  EXPECT_EQ(out.error, "");
  const json patched = patchedObject(body, responseOf(out));
  EXPECT_EQ(patched["spec"]["containers"][0]["image"], "registry.local/nginx:1.25");
  EXPECT_EQ(patched["spec"]["containers"][1]["image"], "registry.local/busybox:1.36");
  ASSERT_EQ(out.changes.size(), 2u);
  EXPECT_EQ(out.changes[1].path, "/spec/containers/1/image");
  // A wrong type given first and replaced is no error; one given last is.
  expectRefused(reviewPod(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",)"
                          R"("request":{"uid":"u","object":{"spec":{"containers":[{"image":7}]}},)"
                          R"("object":5}})",
                          kOverrides),
                "request.object is number");
}

TEST(ImageOverrides, APodWithMoreImagesToReplaceThanTheLimitIsAllowedUnpatched) {
  json pod = {{"spec", {{"containers", json::array()}}}};
  for (std::size_t i = 0; i <= kMaxImageChanges; ++i) {
    pod["spec"]["containers"].push_back({{"image", "nginx:1.25"}});
  }
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request", {{"uid", "u"}, {"operation", "CREATE"}, {"object", pod}}}};
  expectRefused(reviewPod(review.dump(), kOverrides), "more than 4096 images");
  pod["spec"]["containers"].erase(pod["spec"]["containers"].size() - 1);
  review["request"]["object"] = pod;
  EXPECT_EQ(reviewPod(review.dump(), kOverrides).changes.size(), kMaxImageChanges);
}

TEST(ImageOverrides, AnOverlongUidIsNotEchoed) {
  const std::string body =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":")" +
      std::string(5000, 'u') + R"(","object":{"spec":{}}}})";
  const ReviewOutcome out = reviewPod(body, kOverrides);
  EXPECT_EQ(out.uid, "");
  expectRefused(out, "request.uid is longer than 1024 bytes");
}

TEST(ImageOverrides, ParsesEntriesLastOneWinning) {
  const ImageOverrides o = parseImageOverrides({"a=b", "junk", "=x", "y=", "a=c"});
  EXPECT_EQ(o, (ImageOverrides{{"a", "c"}}));
}

}  // namespace
}  // namespace ekco::agent::admission
