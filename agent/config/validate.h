// The value and cross-key rules of ekco's configuration, one set for every reader: the agent,
// every command and `ekco config check` load a config through ConfigLoader, whose finish()
// applies these after the sources are merged. A broken rule is one problem naming the key; a
// rejected value is quoted with base::quoteForMessage (escaped, so a value cannot forge a line
// or send terminal escapes).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "agent/config/config.h"

namespace ekco::agent {

// Minimums below which the agent cannot work as configured.
inline constexpr Duration kMinReconcileInterval = std::chrono::seconds(1);
inline constexpr Duration kMinLeaderElectionRetryPeriod = std::chrono::milliseconds(100);
// sun_path's 108 bytes less the terminating NUL (agent/serve/health_server.cc checks the path
// under the host root when it binds).
inline constexpr std::size_t kMaxSocketPathBytes = 107;

using ConfigProblemFn = std::function<void(std::string_view key, std::string message)>;

// Checks `c` (and fills in what a zero means, as EKCO does: reconcile_timeout 0 = 15 minutes).
// `is_set` tells whether a key was given by some source (for naming the key a cross-key problem
// belongs to).
void checkConfigRules(Config& c, const ConfigProblemFn& problem,
                      const std::function<bool(std::string_view key)>& is_set);

// An RFC 1123 label (a namespace name).
bool isDnsLabel(std::string_view s);

}  // namespace ekco::agent
