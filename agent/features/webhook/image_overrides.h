// Pod image overrides as an admission decision: an AdmissionReview in, an AdmissionReview out,
// nothing else (no I/O, no clock, no logging). The HTTPS server
// (agent/features/webhook/webhook_server.h) calls it for every POST; the fuzz target
// tests/fuzz/admission_fuzz.cc calls it with anything.
//
// What it does (EKCO's pkg/webhook/pod-image-overrides.go, ../shared/reference/ekco.md §3.8):
// every `image` of spec.containers[*], spec.initContainers[*] and spec.ephemeralContainers[*]
// equal (exact string match) to an override's original is replaced by a JSON patch (RFC 6902,
// `replace /spec/<list>/<i>/image`), sent base64-encoded with patchType JSONPatch.
//
// Beyond EKCO:
//   - Every request gets a response (EKCO bug (e): a pod it could not decode got none). A body
//     that is not JSON, not an AdmissionReview of admission.k8s.io/v1 (v1beta1 included), has no
//     request, no uid, no object, a value of the wrong type, or is not a Pod, is ALLOWED
//     unpatched, with the uid when one could be read, and `error` says why in one line.
//   - The response carries apiVersion and kind (EKCO bug (d): the apiserver rejects a v1
//     response without them).
//   - The body is read as it is parsed (a SAX pass), keeping only what the decision needs: a
//     review's memory is the body plus up to 5x its longest string (the parser's two buffers for
//     it, grown by doubling), whatever its shape. A pod with more than kMaxImageChanges images to
//     replace (or, in one list, with an override) is allowed unpatched with an error, which bounds
//     the response; a uid longer than 1 KiB is not echoed (the apiserver's are 36 bytes).
//   - On UPDATE, an image the update does not change (the same as oldObject's at that index) is
//     left alone: a label change on a pod created before an override existed must not restart
//     its containers with another image, nor be refused (an init container's image is
//     immutable).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ekco::agent::admission {

// original image -> overridden image.
using ImageOverrides = std::map<std::string, std::string, std::less<>>;

// The admission API's own request limit (kube-apiserver reads at most 3 MiB of a request body,
// and an AdmissionReview carries one object and its old version).
inline constexpr std::size_t kMaxReviewBytes = std::size_t{3} << 20;

// The most images one review replaces (a real pod has a handful; the apiserver's 3 MiB allow
// ~70,000 containers).
inline constexpr std::size_t kMaxImageChanges = 4096;

// One replaced image, for logs and tests.
struct ImageChange {
  std::string path{};  // "/spec/containers/0/image"
  std::string from{};
  std::string to{};
};

struct ReviewOutcome {
  std::string response{};   // the AdmissionReview to send back (JSON), always set
  std::string uid{};        // request.uid as read ("" when it could not be)
  std::string pod{};        // "namespace/name" (or generateName…) for logs, when readable
  std::string operation{};  // request.operation, when readable
  std::vector<ImageChange> changes{};
  // Why the request could not be handled, one line without control characters; "" when it was
  // (with or without changes). A response is sent either way, always allowed.
  std::string error{};
};

// Parses entries "original=overridden" (config key pod_image_overrides, already validated by
// the config loader; an entry without '=' is skipped).
ImageOverrides parseImageOverrides(const std::vector<std::string>& entries);

// The decision. Never throws; `body` may be anything.
ReviewOutcome reviewPod(std::string_view body, const ImageOverrides& overrides);

}  // namespace ekco::agent::admission
