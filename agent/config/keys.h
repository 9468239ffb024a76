// The key table of ekco's configuration: each key's name, type, help and the Config field it
// sets (agent/config/keys.cc). Internal to agent/config/: the loader, `config show` and the
// generated reference (docs/configuration.md) read it.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/config/config.h"

namespace ekco::agent {

using FieldPtr = std::variant<std::monostate, bool Config::*, int64_t Config::*, Duration Config::*,
                              std::string Config::*, std::vector<std::string> Config::*>;

struct KeyDef {
  KeyInfo info;
  FieldPtr field;
  // A key EKCO had (its config file's name), with what differs from EKCO, if anything.
  KeyDef fromEkco(std::string_view note = {}) const {
    KeyDef d = *this;
    d.info.from_ekco = true;
    d.info.ekco_note = note;
    return d;
  }
};

// Every key, in the order of `config show` and of the reference (docs/configuration.md).
const std::vector<KeyDef>& keyDefs();
// The key's definition, or nullptr.
const KeyDef* findKey(std::string_view key);
// Its value in `cfg` as `config show` writes it ("5m", "\"\"", "[]"); "" for an ignored key or
// an alias (render.cc).
std::string renderKeyValue(const Config& cfg, const KeyDef& d);

}  // namespace ekco::agent
