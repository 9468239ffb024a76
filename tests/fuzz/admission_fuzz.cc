// The pod image overrides webhook's decision (agent/features/webhook/image_overrides.h): the input
// is a request body as the HTTPS server hands it over, reviewed with a fixed set of overrides.
//
// Checks: every input gets a response that is a JSON AdmissionReview (admission.k8s.io/v1, or
// v1beta1 when that is what came) with kind AdmissionReview, allowed true and the uid read; a
// refused request has a one-line error and no patch; an accepted one's patch decodes to an RFC
// 6902 array of `replace .../image` operations, one per change, each to an overridden image,
// which applies cleanly to the request's object and leaves only override targets where it
// pointed.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/features/webhook/image_overrides.h"
#include "kube/transport/kubeconfig.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using ekco::fuzz::check;
using ekco::fuzz::checkOneLine;
using Json = nlohmann::json;
namespace admission = ekco::agent::admission;

const admission::ImageOverrides& overrides() {
  static const admission::ImageOverrides o = admission::parseImageOverrides(
      {"nginx:1.25=registry.local/nginx:1.25", "busybox=registry.local/busybox",
       "projectcontour/contour:v1.18.0=myregistry.io/contour:v1.18.0-fips"});
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body = ekco::fuzz::asText(data, size);
  const admission::ReviewOutcome out = admission::reviewPod(body, overrides());
  checkOneLine(out.error, "error");
  Json review;
  try {
    review = Json::parse(out.response);
  } catch (const std::exception&) {
    ekco::fuzz::fail("the response is not JSON", out.response);
  }
  check(review.is_object() && review.value("kind", "") == "AdmissionReview", "kind", out.response);
  const std::string version = review.value("apiVersion", "");
  check(version == "admission.k8s.io/v1" || version == "admission.k8s.io/v1beta1", "apiVersion",
        out.response);
  const Json& response = review["response"];
  check(response.is_object() && response["allowed"] == true, "allowed", out.response);
  check(response["uid"] == out.uid, "the uid echoed", out.response);
  if (!out.error.empty() || out.changes.empty()) {
    check(!response.contains("patch") && !response.contains("patchType"),
          "no patch without changes", out.response);
    check(out.changes.empty(), "no changes with an error", out.error);
    return 0;
  }
  check(response["patchType"] == "JSONPatch", "patchType", out.response);
  auto decoded = ekco::kube::base64Decode(response["patch"].get<std::string>());
  check(decoded.has_value(), "the patch is base64", out.response);
  const Json patch = Json::parse(*decoded);
  check(patch.is_array() && patch.size() == out.changes.size(), "one operation per change",
        *decoded);
  bool is_target = false;
  for (const Json& op : patch) {
    check(op["op"] == "replace", "replace only", *decoded);
    const std::string path = op["path"].get<std::string>();
    check(path.starts_with("/spec/") && path.ends_with("/image"), "image paths only", path);
    is_target = false;
    for (const auto& [from, to] : overrides()) is_target = is_target || op["value"] == to;
    check(is_target, "the value is an overridden image", *decoded);
  }
  // The apiserver applies it to the object it sent: it must apply.
  Json object = Json::parse(body)["request"]["object"];
  Json patched;
  try {
    patched = object.patch(patch);
  } catch (const std::exception& e) {
    ekco::fuzz::fail("the patch does not apply", e.what());
  }
  for (const admission::ImageChange& c : out.changes) {
    check(patched.at(Json::json_pointer(c.path)) == c.to, "patched as said", c.path);
  }
  return 0;
}
