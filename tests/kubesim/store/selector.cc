#include "tests/kubesim/store/selector.h"

#include <algorithm>

namespace ekco::kubesim {
namespace {

using base::Error;
using base::ErrorCode;
using base::Result;

std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// Splits at commas that are not inside parentheses.
std::vector<std::string> splitTopLevel(std::string_view text) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string cur;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(trim(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!trim(cur).empty() || !parts.empty()) parts.push_back(trim(cur));
  return parts;
}

std::vector<std::string> splitComma(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    auto pos = text.find(',', start);
    out.push_back(trim(text.substr(start, pos == std::string_view::npos ? pos : pos - start)));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

Error invalid(std::string_view what, std::string_view text) {
  return Error("unable to parse requirement: " + std::string(what) + ": " + std::string(text),
               ErrorCode::kInvalidArgument);
}

}  // namespace

Result<LabelSelector> LabelSelector::parse(std::string_view text) {
  LabelSelector sel;
  for (const std::string& part : splitTopLevel(text)) {
    if (part.empty()) return invalid("empty requirement", text);
    Requirement req;
    auto set_in = [&](std::size_t op_pos, std::size_t op_len, Op op) -> base::Status {
      req.key = trim(part.substr(0, op_pos));
      std::string rest = trim(part.substr(op_pos + op_len));
      if (rest.size() < 2 || rest.front() != '(' || rest.back() != ')') {
        return invalid("expected '(' values ')'", part);
      }
      req.op = op;
      req.values = splitComma(std::string_view(rest).substr(1, rest.size() - 2));
      return base::ok();
    };
    std::size_t pos;
    if (part.front() == '!') {
      req.key = trim(part.substr(1));
      req.op = Op::kNotExists;
    } else if ((pos = part.find(" notin ")) != std::string::npos) {
      EKCO_TRY(set_in(pos, 7, Op::kNotIn));
    } else if ((pos = part.find(" in ")) != std::string::npos) {
      EKCO_TRY(set_in(pos, 4, Op::kIn));
    } else if ((pos = part.find("!=")) != std::string::npos) {
      req.key = trim(part.substr(0, pos));
      req.op = Op::kNotEq;
      req.values = {trim(part.substr(pos + 2))};
    } else if ((pos = part.find("==")) != std::string::npos) {
      req.key = trim(part.substr(0, pos));
      req.values = {trim(part.substr(pos + 2))};
    } else if ((pos = part.find('=')) != std::string::npos) {
      req.key = trim(part.substr(0, pos));
      req.values = {trim(part.substr(pos + 1))};
    } else {
      req.key = part;
      req.op = Op::kExists;
    }
    if (req.key.empty() || req.key.find_first_of(" ()!=") != std::string::npos) {
      return invalid("invalid label key", part);
    }
    sel.reqs_.push_back(std::move(req));
  }
  return sel;
}

bool LabelSelector::matches(const nlohmann::json& labels) const {
  for (const Requirement& req : reqs_) {
    const std::string* value = nullptr;
    if (labels.is_object()) {
      auto it = labels.find(req.key);
      if (it != labels.end() && it->is_string()) value = it->get_ptr<const std::string*>();
    }
    bool in = value != nullptr &&
              std::find(req.values.begin(), req.values.end(), *value) != req.values.end();
    bool ok = false;
    switch (req.op) {
      case Op::kEq:
      case Op::kIn:
        ok = in;
        break;
      case Op::kNotEq:
      case Op::kNotIn:
        ok = !in;
        break;
      case Op::kExists:
        ok = value != nullptr;
        break;
      case Op::kNotExists:
        ok = value == nullptr;
        break;
    }
    if (!ok) return false;
  }
  return true;
}

Result<FieldSelector> FieldSelector::parse(std::string_view text) {
  FieldSelector sel;
  for (const std::string& part : splitComma(text)) {
    if (part.empty() && text.empty()) break;
    Requirement req;
    std::size_t pos;
    std::string path;
    if ((pos = part.find("!=")) != std::string::npos) {
      path = trim(part.substr(0, pos));
      req.negate = true;
      req.value = trim(part.substr(pos + 2));
    } else if ((pos = part.find("==")) != std::string::npos) {
      path = trim(part.substr(0, pos));
      req.value = trim(part.substr(pos + 2));
    } else if ((pos = part.find('=')) != std::string::npos) {
      path = trim(part.substr(0, pos));
      req.value = trim(part.substr(pos + 1));
    } else {
      return Error("invalid field selector: " + part, ErrorCode::kInvalidArgument);
    }
    if (path.empty()) return Error("invalid field selector: " + part, ErrorCode::kInvalidArgument);
    req.label = path;
    std::size_t start = 0;
    while (true) {
      auto dot = path.find('.', start);
      req.path.push_back(path.substr(start, dot == std::string::npos ? dot : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    sel.reqs_.push_back(std::move(req));
  }
  return sel;
}

bool FieldSelector::matches(const nlohmann::json& object) const {
  for (const Requirement& req : reqs_) {
    const nlohmann::json* cur = &object;
    for (const std::string& seg : req.path) {
      if (cur == nullptr || !cur->is_object()) {
        cur = nullptr;
        break;
      }
      auto it = cur->find(seg);
      cur = it == cur->end() ? nullptr : &*it;
    }
    std::string value = cur == nullptr || cur->is_null() ? req.unset : std::string();
    if (cur != nullptr) {
      if (cur->is_string()) {
        value = cur->get<std::string>();
      } else if (!cur->is_null()) {
        value = cur->dump();
      }
    }
    if ((value == req.value) == req.negate) return false;
  }
  return true;
}

std::optional<std::string> FieldSelector::equalTo(std::string_view label) const {
  for (const Requirement& req : reqs_) {
    if (req.label == label && !req.negate) return req.value;
  }
  return std::nullopt;
}

std::vector<std::string> FieldSelector::labels() const {
  std::vector<std::string> out;
  for (const Requirement& req : reqs_) out.push_back(req.label);
  return out;
}

void FieldSelector::mapLabels(const std::map<std::string, FieldLabel>& labels) {
  for (Requirement& req : reqs_) {
    auto it = labels.find(req.label);
    if (it == labels.end()) continue;
    req.unset = it->second.unset;
    req.path.clear();
    std::string_view path = it->second.path;
    while (true) {
      auto dot = path.find('.');
      req.path.emplace_back(path.substr(0, dot));
      if (dot == std::string_view::npos) break;
      path.remove_prefix(dot + 1);
    }
  }
}

}  // namespace ekco::kubesim
