#include "kube/watch/informer.h"

#include <algorithm>

#include "base/os/heap.h"
#include "kube/decode/json_depth.h"
#include "kube/decode/records.h"

namespace ekco::kube {

using base::Error;
using base::ErrorCode;

std::string objectKey(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string key;
  key.reserve(ns.size() + 1 + name.size());
  key.append(ns).append("/").append(name);
  return key;
}

base::Result<std::string> objectKey(const Json& object) {
  if (object.is_object()) {
    auto meta = object.find("metadata");
    if (meta != object.end() && meta->is_object()) {
      auto name = meta->find("name");
      auto ns = meta->find("namespace");
      if (name != meta->end() && name->is_string() &&
          !name->get_ref<const std::string&>().empty()) {
        const bool has_ns = ns != meta->end() && ns->is_string();
        return objectKey(has_ns ? std::string_view(ns->get_ref<const std::string&>()) : "",
                         name->get_ref<const std::string&>());
      }
    }
  }
  return Error("object without metadata.name", ErrorCode::kParse);
}

base::Result<Json> parseObjectText(JsonText object, ObjectMeta& meta, std::string& key) {
  meta = {};
  key.clear();
  if (jsonNestedDeeperThan(object.text)) {
    return Error("object nested deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                 ErrorCode::kParse);
  }
  auto json = Json::parse(object.text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Error("object is not valid JSON", ErrorCode::kParse);
  if (auto m = json.find("metadata"); m != json.end() && m->is_object()) {
    auto text = [&](const char* field) {
      auto it = m->find(field);
      return it != m->end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    meta = {
        .name = text("name"), .ns = text("namespace"), .resource_version = text("resourceVersion")};
  }
  auto k = objectKey(json);
  if (!k) return std::move(k).error();
  key = std::move(*k);
  return json;
}

InformerBase::InformerBase(KubeClient& client, const base::Clock& clock, Resource resource,
                           std::string ns, InformerOptions options, ErrorHandler on_error)
    : client_(client),
      clock_(clock),
      resource_(std::move(resource)),
      ns_(std::move(ns)),
      options_(std::move(options)),
      on_error_(std::move(on_error)),
      random_(std::random_device()()) {
  description_ = resource_.plural;
  if (!resource_.group.empty()) description_ += "." + resource_.group;
  if (resource_.namespaced) description_ += ns_.empty() ? " in all namespaces" : " in " + ns_;
  if (!options_.label_selector.empty()) description_ += " labelled " + options_.label_selector;
  if (!options_.field_selector.empty()) description_ += " where " + options_.field_selector;
}

void InformerBase::stop() {
  stopping_.store(true);
  cancel_.cancel();
  std::lock_guard lock(mu_);
  cv_.notify_all();
}

bool InformerBase::synced() const {
  std::lock_guard lock(mu_);
  return stats_.synced;
}

bool InformerBase::waitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return stats_.synced || stopping(); });
  return stats_.synced;
}

InformerStats InformerBase::stats() const {
  InformerStats out;
  {
    std::lock_guard lock(mu_);
    out = stats_;
  }
  out.objects = size();
  return out;
}

void InformerBase::failed(const Error& error) {
  {
    std::lock_guard lock(mu_);
    ++stats_.failures;
    stats_.connected = false;
    stats_.last_error = error.message();
    stats_.last_error_time = clock_.wallNow();
  }
  if (on_error_) on_error_(error);
}

bool InformerBase::backoff(int failures) {
  const int doublings = std::clamp(failures - 1, 0, 30);
  auto delay = options_.initial_backoff;
  for (int i = 0; i < doublings && delay < options_.max_backoff; ++i) delay *= 2;
  delay = std::min(delay, options_.max_backoff);
  std::uniform_real_distribution<double> half(0.5, 1.0);
  const auto wait = std::chrono::milliseconds(
      static_cast<std::int64_t>(static_cast<double>(delay.count()) * half(random_)));
  if (options_.on_backoff) options_.on_backoff(failures, wait);
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, wait, [&] { return stopping(); });
  return !stopping();
}

InformerBase::ListOutcome InformerBase::list() {
  // An expired continue token (the snapshot was compacted mid-list) restarts from the top, a
  // few times; after that it is a failure like any other and the caller backs off.
  constexpr int kMaxRestarts = 3;
  for (int restart = 0; restart <= kMaxRestarts; ++restart) {
    beginReplace();
    std::string continue_token;
    std::string list_version;
    bool expired = false;
    do {
      if (stopping()) {
        abortReplace();
        return ListOutcome::kStopped;
      }
      auto text = client_.listText(resource_, ns_,
                                   {.label_selector = options_.label_selector,
                                    .field_selector = options_.field_selector,
                                    .limit = options_.page_size,
                                    .continue_token = continue_token});
      if (!text) {
        abortReplace();
        decoder_.release();
        if (text.error().code() == ErrorCode::kGone && !continue_token.empty()) {
          expired = true;
          break;
        }
        failed(text.error());  // the client's message names the list
        return ListOutcome::kFailed;
      }
      auto page = decoder_.listPage(padded(*text), "list " + description_);
      if (!page) {
        abortReplace();
        decoder_.release();
        failed(page.error());
        return ListOutcome::kFailed;
      }
      if (continue_token.empty()) list_version = std::move(page->resource_version);
      continue_token = std::move(page->continue_token);
      addPageItems(page->items);
    } while (!continue_token.empty());
    // No parser buffer sized for a page stays behind (the page texts are gone already).
    decoder_.release();
    if (expired) continue;
    if (list_version.empty()) {
      abortReplace();
      failed(Error("list " + description_ + ": response has no metadata.resourceVersion",
                   ErrorCode::kParse));
      return ListOutcome::kFailed;
    }
    commitReplace();
    // Give the heap the lists' pages and the old store freed back to the kernel: glibc keeps
    // freed memory in its arenas otherwise, and a large first list would stay in the RSS.
    base::releaseFreeHeap();
    {
      std::lock_guard lock(mu_);
      stats_.synced = true;
      stats_.connected = true;
      stats_.resource_version = std::move(list_version);
      ++stats_.lists;
      stats_.last_sync = clock_.wallNow();
    }
    cv_.notify_all();
    notifySynced();
    return ListOutcome::kDone;
  }
  failed(Error("list " + description_ + ": continue token expired " +
                   std::to_string(kMaxRestarts + 1) + " times in a row",
               ErrorCode::kGone));
  return ListOutcome::kFailed;
}

void InformerBase::addPageItems(const std::vector<JsonText>& items) {
  for (const JsonText& item : items) {
    // An item that is not an object has no name (objectKey's error).
    base::Status added =
        item.text.empty() ? base::Status(Error("object without metadata.name", ErrorCode::kParse))
                          : addToReplace(item);
    if (!added) {
      {
        std::lock_guard lock(mu_);
        ++stats_.parse_errors;
      }
      if (on_error_) on_error_(added.error().wrap("list " + description_));
    }
  }
}

base::Status InformerBase::watchOnce(std::uint64_t& events_seen, bool& accepted) {
  WatchOptions options;
  {
    std::lock_guard lock(mu_);
    options.resource_version = stats_.resource_version;
    ++stats_.watches;
  }
  const std::int64_t base_timeout = std::max<std::int64_t>(1, options_.watch_timeout.count());
  std::uniform_int_distribution<std::int64_t> spread(0, base_timeout - 1);
  options.timeout_seconds = base_timeout + spread(random_);
  options.allow_watch_bookmarks = true;
  options.idle_timeout = options_.watch_idle_timeout;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.on_open = [this, &accepted] {
    accepted = true;
    std::lock_guard lock(mu_);
    stats_.connected = true;
  };

  const std::string op = "watch " + description_;
  std::string scratch;
  auto status = client_.watchText(
      resource_, ns_, options,
      [&](JsonText line, bool& keep_going) -> base::Status {
        auto event = decoder_.watchLine(line, op, scratch);
        if (!event) return std::move(event).error();  // ends the stream (an ERROR, garbage)
        if (event->type == WatchEventType::kBookmark) {
          ObjectMeta meta;
          (void)decodeMeta(event->object, meta);
          std::lock_guard lock(mu_);
          ++stats_.bookmarks;
          stats_.connected = true;
          stats_.last_event = clock_.wallNow();
          if (!meta.resource_version.empty()) {
            stats_.resource_version = std::move(meta.resource_version);
          }
          keep_going = !stopping();
          return base::ok();
        }
        ++events_seen;
        bool changed = true;
        ObjectMeta meta;
        base::Status applied = apply(event->type, event->object, meta, changed);
        {
          std::lock_guard lock(mu_);
          ++stats_.events;
          stats_.connected = true;
          stats_.last_event = clock_.wallNow();
          if (!changed) ++stats_.unchanged;
          if (!applied) ++stats_.parse_errors;
          if (!meta.resource_version.empty()) {
            stats_.resource_version = std::move(meta.resource_version);
          }
        }
        if (!applied && on_error_) on_error_(applied.error().wrap("watch " + description_));
        keep_going = !stopping();
        return base::ok();
      },
      &cancel_);
  return status;
}

void InformerBase::run() {
  int failures = 0;
  bool need_list = true;
  while (!stopping()) {
    if (need_list) {
      switch (list()) {
        case ListOutcome::kStopped:
          return;
        case ListOutcome::kFailed:
          if (!backoff(++failures)) return;
          continue;
        case ListOutcome::kDone:
          need_list = false;
          failures = 0;
          break;
      }
    }
    const auto started = clock_.monoNow();
    std::uint64_t events_seen = 0;
    bool accepted = false;
    auto watched = watchOnce(events_seen, accepted);
    if (stopping()) return;
    if (watched) {
      // The server ended the stream (its timeout): watch again from the last version at once,
      // unless it ended suspiciously fast with nothing in it.
      if (events_seen == 0 && clock_.monoNow() - started < options_.short_watch) {
        failed(Error("watch " + description_ + ": the server ended the stream at once",
                     ErrorCode::kUnavailable));
        if (!backoff(++failures)) return;
      } else {
        failures = 0;
      }
      continue;
    }
    if (watched.error().code() == ErrorCode::kGone) {
      // Not a failure: the version is too old. List again now, as client-go does.
      std::lock_guard lock(mu_);
      ++stats_.relists_gone;
      need_list = true;
      continue;
    }
    if (watched.error().code() == ErrorCode::kCancelled) return;
    failed(watched.error());
    // A stream the decoder could not read (an event line without end, garbage): resuming from
    // the same version replays the same stream, so the cache would never move again while each
    // new watch looked connected. List again instead, as client-go does after a decode error.
    if (watched.error().code() == ErrorCode::kParse) need_list = true;
    // A watch that delivered events, or that the server accepted and that then ran a while
    // (quiet resources send nothing for minutes), was a success: the outage that ended it backs
    // off from the start, as after a good list. Otherwise identical short outages would take
    // ever longer to recover from. One that broke at once keeps growing the backoff.
    if (events_seen > 0 || (accepted && clock_.monoNow() - started >= options_.short_watch)) {
      failures = 0;
    }
    if (!backoff(++failures)) return;
  }
}

}  // namespace ekco::kube
