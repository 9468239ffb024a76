#include "kube/watch/list_decode.h"

#include "kube/decode/json_fields.h"
#include "kube/decode/simdjson_support.h"

namespace ekco::kube {

using base::Error;
using base::ErrorCode;
namespace ondemand = simd::ondemand;

struct JsonDecoder::Impl {
  std::unique_ptr<ondemand::parser> page;
  std::unique_ptr<ondemand::parser> line;
};

JsonDecoder::JsonDecoder() : impl_(std::make_unique<Impl>()) {}
JsonDecoder::~JsonDecoder() = default;

void JsonDecoder::release() {
  impl_->page.reset();
  impl_->line.reset();
  simd::trimItemParser();
}

base::Result<ListPage> JsonDecoder::listPage(JsonText page, std::string_view op) {
  auto not_json = [&] {
    return Error(std::string(op) + ": response is not JSON", ErrorCode::kParse);
  };
  auto not_list = [&] {
    return Error(std::string(op) + ": response is not a List (no items or metadata)",
                 ErrorCode::kParse);
  };
  if (!impl_->page) impl_->page = std::make_unique<ondemand::parser>();
  ondemand::document doc;
  if (simd::iterate(*impl_->page, page).get(doc) != simdjson::SUCCESS) return not_json();
  ondemand::json_type top_type;
  if (doc.type().get(top_type) != simdjson::SUCCESS) return not_json();
  if (top_type != ondemand::json_type::object) {
    // A scalar or array: still must be valid JSON to be "not a List" rather than "not JSON".
    std::string_view raw;
    if (top_type == ondemand::json_type::array) {
      ondemand::array array;
      if (doc.get_array().get(array) != simdjson::SUCCESS ||
          array.raw_json().get(raw) != simdjson::SUCCESS || !simd::atEnd(doc)) {
        return not_json();
      }
    }
    return not_list();
  }
  ondemand::object top;
  if (doc.get_object().get(top) != simdjson::SUCCESS) return not_json();
  ListPage out;
  bool have_items = false;
  bool have_meta = false;
  for (auto field : top) {
    std::string_view key;
    ondemand::value value;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS ||
        field.value().get(value) != simdjson::SUCCESS) {
      return not_json();
    }
    ondemand::json_type type;
    if (value.type().get(type) != simdjson::SUCCESS) return not_json();
    if (key == "metadata") {
      // The last occurrence wins, as in a DOM.
      have_meta = type == ondemand::json_type::object;
      out.resource_version.clear();
      out.continue_token.clear();
      if (!have_meta) continue;
      ondemand::object meta;
      if (value.get_object().get(meta) != simdjson::SUCCESS) return not_json();
      for (auto m : meta) {
        std::string_view mkey;
        ondemand::value mvalue;
        if (m.unescaped_key().get(mkey) != simdjson::SUCCESS ||
            m.value().get(mvalue) != simdjson::SUCCESS) {
          return not_json();
        }
        if (mkey == "resourceVersion") {
          if (!simd::stringOrEmpty(mvalue, out.resource_version)) return not_json();
        } else if (mkey == "continue") {
          if (!simd::stringOrEmpty(mvalue, out.continue_token)) return not_json();
        }
      }
    } else if (key == "items") {
      out.items.clear();
      have_items = type == ondemand::json_type::array || type == ondemand::json_type::null;
      if (type != ondemand::json_type::array) continue;
      ondemand::array items;
      if (value.get_array().get(items) != simdjson::SUCCESS) return not_json();
      for (auto element : items) {
        ondemand::value item;
        ondemand::json_type item_type;
        if (element.get(item) != simdjson::SUCCESS ||
            item.type().get(item_type) != simdjson::SUCCESS) {
          return not_json();
        }
        if (item_type != ondemand::json_type::object) {
          out.items.emplace_back();  // skipped by the iteration; an error for that item
          continue;
        }
        ondemand::object object;
        std::string_view raw;
        if (item.get_object().get(object) != simdjson::SUCCESS ||
            object.raw_json().get(raw) != simdjson::SUCCESS) {
          return not_json();
        }
        const auto offset = static_cast<std::size_t>(raw.data() - page.text.data());
        out.items.push_back({.text = raw, .capacity = page.capacity - offset});
      }
    }
  }
  if (!simd::atEnd(doc)) return not_json();
  if (!have_items || !have_meta) return not_list();
  return out;
}

base::Result<WatchLine> JsonDecoder::watchLine(JsonText line, std::string_view op,
                                               std::string& scratch) {
  if (!impl_->line) impl_->line = std::make_unique<ondemand::parser>();
  // The fast path reads a well-formed ADDED/MODIFIED/DELETED/BOOKMARK event; anything else
  // (an ERROR Status, a malformed line) goes to the DOM decoder, which says what is wrong.
  auto fast = [&]() -> std::optional<WatchLine> {
    ondemand::document doc;
    ondemand::object top;
    if (simd::iterate(*impl_->line, line).get(doc) != simdjson::SUCCESS ||
        doc.get_object().get(top) != simdjson::SUCCESS) {
      return std::nullopt;
    }
    std::optional<WatchEventType> type;
    std::optional<JsonText> object;
    for (auto field : top) {
      std::string_view key;
      ondemand::value value;
      if (field.unescaped_key().get(key) != simdjson::SUCCESS ||
          field.value().get(value) != simdjson::SUCCESS) {
        return std::nullopt;
      }
      if (key == "type") {
        std::string_view name;
        if (value.get_string().get(name) != simdjson::SUCCESS) return std::nullopt;
        if (name == "ADDED") {
          type = WatchEventType::kAdded;
        } else if (name == "MODIFIED") {
          type = WatchEventType::kModified;
        } else if (name == "DELETED") {
          type = WatchEventType::kDeleted;
        } else if (name == "BOOKMARK") {
          type = WatchEventType::kBookmark;
        } else {
          return std::nullopt;
        }
      } else if (key == "object") {
        ondemand::object o;
        std::string_view raw;
        if (value.get_object().get(o) != simdjson::SUCCESS ||
            o.raw_json().get(raw) != simdjson::SUCCESS) {
          return std::nullopt;
        }
        const auto offset = static_cast<std::size_t>(raw.data() - line.text.data());
        object = JsonText{.text = raw, .capacity = line.capacity - offset};
      }
    }
    if (!simd::atEnd(doc) || !type || !object) return std::nullopt;
    return WatchLine{.type = *type, .object = *object};
  };
  auto decoded = fast();
  // A long line leaves no long-lived buffer behind: the parser is rebuilt for the next one.
  // (The decoded object points into `line`, not into the parser.)
  if (impl_->line->capacity() > simd::kKeptItemCapacity) impl_->line.reset();
  if (decoded) return *decoded;
  auto event = parseWatchEvent(line.text, std::string(op));
  if (!event) return std::move(event).error();
  scratch = jsonDump(event->object);
  return WatchLine{.type = event->type, .object = padded(scratch)};
}

}  // namespace ekco::kube
