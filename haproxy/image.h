// Container image references, as the HAProxy static pod uses them: validation (so a value from
// config.yaml is never spliced raw into a manifest) and the HAProxy version a tag names.
#pragma once

#include <optional>
#include <string_view>

#include "base/result.h"

namespace ekco::haproxy {

// Checks `image` against the distribution reference grammar (github.com/distribution/reference, the
// one containerd and kubelet apply):
//   [DOMAIN[:PORT]/]PATH[/PATH...][:TAG][@ALGORITHM:HEX]
// PATH components are lower-case alphanumerics joined by '.', '_', '__' or runs of '-'; a TAG is
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; a digest's hex part has at least 32 digits. The first
// component is a domain when it contains '.' or ':' or is "localhost". The name is at most 255
// characters. Anything else (spaces, newlines, quotes, upper-case paths, an empty value) is
// kInvalidArgument naming the value.
[[nodiscard]] base::Status validateImage(std::string_view image);

struct HaproxyVersion {
  int major = 0;
  int minor = 0;

  friend auto operator<=>(const HaproxyVersion&, const HaproxyVersion&) = default;
};

// The HAProxy version an image's tag names, when it names one: "haproxy:2.9.1-alpine" → 2.9,
// "registry:5000/lib/haproxy:3.0" → 3.0, "haproxy:3" → 3.0. nullopt (unknown) for a moving tag
// ("lts-alpine", "latest", no tag), a digest (what runs is the digest, and the tag beside it is not
// verified), an invalid reference, an image whose last path component is not "haproxy" (its tag
// need not be HAProxy's version), and a bare "2" (any 2.x). Callers treat unknown as "the oldest
// HAProxy we support" (2.6) and render only directives it accepts.
std::optional<HaproxyVersion> haproxyVersionOfImage(std::string_view image);

}  // namespace ekco::haproxy
