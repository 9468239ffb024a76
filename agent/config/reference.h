// The configuration reference, generated from the one keys table (keys.cc) and the kURL
// Installer table (kurl_installer.h) so that it cannot drift from what the loader does:
//   - the generated part of docs/configuration.md (`ekco config reference`, kept current by
//     scripts/gen-docs; a test fails when the committed page differs);
//   - ekco-config(5) (`ekco config reference --format man`);
//   - one key's entry (`ekco config show --explain KEY`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ekco::agent {

// One key as the reference describes it.
struct KeyReference {
  std::string key;
  std::string type;           // "duration", "bool", "int", "string", "list"
  std::string default_value;  // as `config show` prints it; "" for an ignored key or an alias
  std::string environment;    // EKCO_NODE_UNREACHABLE_TOLERATION
  std::string flag;           // --node-unreachable-toleration
  // The kURL Installer fields that set it: each field's path and what it does to the key.
  struct KurlSource {
    std::string path;  // "spec.ekco.shouldDisableClearNodes"
    std::string how;   // "negated"
  };
  std::vector<KurlSource> kurl;
  std::string help;
  // "acted on"; "ignored: ..." (accepted with a warning); "no effect in ekco: ..." (a warning
  // when set to anything but its default); "alias of KEY".
  std::string status;
  bool from_ekco = false;  // EKCO had the key
  std::string ekco;        // "new in ekco", "as in EKCO", or what differs from EKCO
};

// Every key, in the keys table's order.
std::vector<KeyReference> keyReferences();

enum class ReferenceFormat { kMarkdown, kMan };
// kMarkdown: the generated part of docs/configuration.md (a summary table, then one section per
// key with a stable anchor `#key-<name>`). kMan: the whole ekco-config(5) page in roff.
std::string renderConfigReference(ReferenceFormat format);

// `ekco config show --explain KEY`: the key's entry as plain text; kNotFound naming the key
// (and the closest keys) when there is no such key.
base::Result<std::string> explainKey(std::string_view key);

}  // namespace ekco::agent
