// Store::list: lists as of a resourceVersion (the current one, an exact older one, or the first
// page's for later pages), as kube-apiserver reads etcd at a revision.
#include <algorithm>
#include <cstdlib>
#include <set>

#include "tests/kubesim/store/list_options.h"
#include "tests/kubesim/store/selector.h"
#include "tests/kubesim/store/store.h"
#include "tests/kubesim/store/store_support.h"

namespace ekco::kubesim {

using nlohmann::json;

namespace {

std::string toHex(std::string_view s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::optional<std::string> fromHex(std::string_view s) {
  if (s.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += 2) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = nib(s[i]);
    int lo = nib(s[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

// A continue token: hex("<resourceVersion of the first page>/<last key returned>"), where the
// resourceVersion "-1" means "continue at the current state" (the token kube-apiserver hands
// out with 410 when the first page's revision was compacted).
std::string continueToken(const std::string& rv, const std::string& last_key) {
  return toHex(rv + "/" + last_key);
}

const char* const kContinueExpired =
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list.";

}  // namespace

// One function for the list's read path (options, snapshot, selection, paging); kept whole.
Reply Store::list(const ResourceInfo& r, const std::string& ns, const ListOptions& options) const {
  auto labels = LabelSelector::parse(options.label_selector);
  if (!labels) return statusReply(400, "BadRequest", labels.error().message());
  auto fields = fieldSelectorFor(r, options.field_selector);
  if (!fields) return statusReply(400, "BadRequest", fields.error().message());
  // (1) Which state: a continue token's, an exact resourceVersion's, or the current one.
  std::string start_after;
  std::optional<std::uint64_t> at;  // nullopt: the current state
  if (!options.continue_token.empty()) {
    auto decoded = fromHex(options.continue_token);
    auto slash = decoded ? decoded->find('/') : std::string::npos;
    char* end = nullptr;
    const std::string rv_text = slash == std::string::npos ? "" : decoded->substr(0, slash);
    const std::uint64_t token_rv = std::strtoull(rv_text.c_str(), &end, 10);
    if (rv_text != "-1" && (rv_text.empty() || *end != '\0' || token_rv == 0)) {
      return statusReply(400, "BadRequest", "continue key is not valid: " + options.continue_token);
    }
    start_after = decoded->substr(slash + 1);
    if (rv_text != "-1") at = token_rv;
  }
  std::optional<std::uint64_t> requested;
  if (!options.resource_version.empty() && options.resource_version != "0") {
    char* end = nullptr;
    requested = std::strtoull(options.resource_version.c_str(), &end, 10);
    if (*end != '\0' || options.resource_version[0] == '-') {
      return statusReply(400, "BadRequest",
                         "invalid resource version: " + options.resource_version);
    }
  }
  std::unique_lock lock(mu_);
  if (requested && *requested > rv_) {
    // A resourceVersion the server has not reached: the watch cache waits up to 3 s for it,
    // then answers 504 with the ResourceVersionTooLarge cause (storage.
    // NewTooLargeResourceVersionError, retry after 1 s).
    cv_.wait_for(lock, std::chrono::seconds(3), [&] { return shutdown_ || rv_ >= *requested; });
    if (*requested > rv_) {
      Reply reply =
          statusReply(504, "Timeout",
                      "Timeout: Too large resource version: " + std::to_string(*requested) +
                          ", current: " + std::to_string(rv_));
      reply.body["details"] = {
          {"causes",
           {{{"reason", "ResourceVersionTooLarge"}, {"message", "Too large resource version"}}}},
          {"retryAfterSeconds", 1}};
      return reply;
    }
  }
  if (at && *at < compacted_rv_) {
    Reply reply = statusReply(410, "Expired", kContinueExpired);
    reply.body["metadata"]["continue"] = continueToken("-1", start_after);
    return reply;
  }
  if (options.resource_version_match == "Exact" && requested) {
    if (*requested < compacted_rv_) {
      return statusReply(410, "Expired", "The resourceVersion for the provided list is too old.");
    }
    at = *requested;
  }
  const std::uint64_t list_rv = at.value_or(rv_);
  // (2) The objects at list_rv: the current ones, overlaid with each key's state before the
  // first later event (absent for an ADDED one).
  static const std::map<std::string, json> kEmpty;
  auto d = data_.find(r.key());
  const auto& live = d == data_.end() ? kEmpty : d->second.objects;
  std::map<std::string, json> overlay;
  if (list_rv < rv_) {
    auto it = std::upper_bound(
        history_.begin(), history_.end(), list_rv,
        [](std::uint64_t v, const WatchEvent& e) { return v < e.resource_version; });
    for (; it != history_.end(); ++it) {
      if (it->key != r.key()) continue;
      const json& obj = it->old.is_null() ? it->object : it->old;
      std::string key = objectKey(store_detail::str(obj, {"metadata", "namespace"}),
                                  store_detail::str(obj, {"metadata", "name"}));
      overlay.emplace(std::move(key), it->old);  // the first event after list_rv wins
    }
  }
  // (3) Select and page in the stable namespace/name order. Keys are "ns/name", so one
  // namespace is one contiguous range. The scan stops at the first match past the page: that is
  // enough to know there is more. (remainingItemCount, optional in the API, is not given:
  // counting the rest of a large list on every page made paging quadratic.)
  const std::string prefix = r.namespaced && !ns.empty() ? ns + "/" : "";
  auto from = [&](const std::map<std::string, json>& m) {
    return start_after.empty() ? m.lower_bound(prefix) : m.upper_bound(start_after);
  };
  const bool selective = !options.label_selector.empty() || !options.field_selector.empty();
  json items = json::array();
  bool more = false;
  std::string last;
  static const json kNoLabels = json::object();
  // Takes one object in order; false once the page is full (and more is known).
  auto take = [&](const std::string& key, const json& obj) {
    if (obj.is_null()) return true;
    if (selective) {
      const json* obj_labels = &kNoLabels;
      if (auto meta = obj.find("metadata"); meta != obj.end() && meta->is_object()) {
        if (auto l = meta->find("labels"); l != meta->end()) obj_labels = &*l;
      }
      if (!labels->matches(*obj_labels)) return true;
      if (!fields->matches(obj)) return true;
    }
    if (options.limit > 0 && static_cast<std::int64_t>(items.size()) >= options.limit) {
      more = true;
      return false;
    }
    items.push_back(obj);
    last = key;
    return true;
  };
  const auto node = r.key() == "/v1/pods" ? fields->equalTo("spec.nodeName") : std::nullopt;
  if (node && overlay.empty()) {
    // One node's pods at the current state: their keys from the spec.nodeName index, in the
    // same order, every selector still applied to each.
    static const std::set<std::string> kNone;
    auto bucket = pods_by_node_.find(*node);
    const auto& keys = bucket == pods_by_node_.end() ? kNone : bucket->second;
    for (auto k = start_after.empty() ? keys.lower_bound(prefix) : keys.upper_bound(start_after);
         k != keys.end(); ++k) {
      if (!prefix.empty() && k->compare(0, prefix.size(), prefix) != 0) break;
      auto found = live.find(*k);
      if (found != live.end() && !take(*k, found->second)) break;
    }
  } else {
    auto li = from(live);
    auto oi = from(overlay);
    while (li != live.end() || oi != overlay.end()) {
      // The next key in order; the overlay's state replaces the live one for the same key.
      const std::string* key;
      const json* obj;
      if (oi == overlay.end() || (li != live.end() && li->first < oi->first)) {
        key = &li->first;
        obj = &li->second;
        ++li;
      } else {
        if (li != live.end() && li->first == oi->first) ++li;
        key = &oi->first;
        obj = &oi->second;
        ++oi;
      }
      if (!prefix.empty() && key->compare(0, prefix.size(), prefix) != 0) break;
      if (!take(*key, *obj)) break;
    }
  }
  json list_meta = {{"resourceVersion", std::to_string(list_rv)}};
  if (more) list_meta["continue"] = continueToken(std::to_string(list_rv), last);
  Reply reply{.code = 200,
              .body = {{"kind", r.kind + "List"},
                       {"apiVersion", r.apiVersion()},
                       {"metadata", std::move(list_meta)}}};
  reply.body["items"] = std::move(items);  // moved: an initializer list would copy every item
  return reply;
}

}  // namespace ekco::kubesim
