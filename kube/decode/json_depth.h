// A bound on the nesting of JSON from a server. nlohmann's parser is iterative, but copying a
// value, dump() and == recurse once per level: one watch line of 100,000 '[' (200 KB) from a
// hostile or broken server overflowed the informer thread's stack (found with
// tests/fuzz/list_watch_fuzz.cc). Kubernetes objects are nowhere near this deep, and the API
// server's own decoder refuses documents nested deeper than 10,000 (sigs.k8s.io/json).
#pragma once

#include <string_view>

namespace ekco::kube {

inline constexpr int kMaxJsonDepth = 1000;

// True when `text` opens more than `max_depth` arrays and objects inside one another (counted
// outside strings, so it need not be valid JSON). Linear, no allocation: call it before parsing.
bool jsonNestedDeeperThan(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace ekco::kube
