#include "kube/informer.h"

#include <algorithm>

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
      auto page = client_.list(resource_, ns_,
                               {.label_selector = options_.label_selector,
                                .field_selector = options_.field_selector,
                                .limit = options_.page_size,
                                .continue_token = continue_token});
      if (!page) {
        abortReplace();
        if (page.error().code() == ErrorCode::kGone && !continue_token.empty()) {
          expired = true;
          break;
        }
        failed(page.error());  // the client's message names the list
        return ListOutcome::kFailed;
      }
      const Json* items = nullptr;
      const Json* meta = nullptr;
      if (page->is_object()) {
        auto it = page->find("items");
        if (it != page->end() && (it->is_array() || it->is_null())) items = &*it;
        auto m = page->find("metadata");
        if (m != page->end() && m->is_object()) meta = &*m;
      }
      if (items == nullptr || meta == nullptr) {
        abortReplace();
        failed(Error("list " + description_ + ": response is not a List (no items or metadata)",
                     ErrorCode::kParse));
        return ListOutcome::kFailed;
      }
      std::string page_version = meta->value("resourceVersion", std::string());
      if (continue_token.empty()) list_version = std::move(page_version);
      continue_token = meta->value("continue", std::string());
      addPageItems(*items);
    } while (!continue_token.empty());
    if (expired) continue;
    if (list_version.empty()) {
      abortReplace();
      failed(Error("list " + description_ + ": response has no metadata.resourceVersion",
                   ErrorCode::kParse));
      return ListOutcome::kFailed;
    }
    commitReplace();
    {
      std::lock_guard lock(mu_);
      stats_.synced = true;
      stats_.connected = true;
      stats_.resource_version = std::move(list_version);
      ++stats_.lists;
      stats_.last_sync = clock_.wallNow();
    }
    cv_.notify_all();
    return ListOutcome::kDone;
  }
  failed(Error("list " + description_ + ": continue token expired " +
                   std::to_string(kMaxRestarts + 1) + " times in a row",
               ErrorCode::kGone));
  return ListOutcome::kFailed;
}

void InformerBase::addPageItems(const Json& items) {
  if (!items.is_array()) return;
  for (const Json& item : items) {
    auto key = objectKey(item);
    base::Status added =
        key ? addToReplace(std::move(*key), item) : base::Status(std::move(key).error());
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

  std::optional<Error> rejected;
  auto status = client_.watch(
      resource_, ns_, options,
      [&](const WatchEvent& event) {
        std::string version;
        if (event.object.is_object()) {
          auto meta = event.object.find("metadata");
          if (meta != event.object.end() && meta->is_object()) {
            version = meta->value("resourceVersion", std::string());
          }
        }
        if (event.type == WatchEventType::kBookmark) {
          std::lock_guard lock(mu_);
          ++stats_.bookmarks;
          stats_.connected = true;
          stats_.last_event = clock_.wallNow();
          if (!version.empty()) stats_.resource_version = std::move(version);
          return !stopping();
        }
        ++events_seen;
        bool changed = true;
        auto key = objectKey(event.object);
        base::Status applied = key ? apply(event.type, std::move(*key), event.object, changed)
                                   : base::Status(std::move(key).error());
        {
          std::lock_guard lock(mu_);
          ++stats_.events;
          stats_.connected = true;
          stats_.last_event = clock_.wallNow();
          if (!changed) ++stats_.unchanged;
          if (!applied) ++stats_.parse_errors;
          if (!version.empty()) stats_.resource_version = std::move(version);
        }
        if (!applied && on_error_) on_error_(applied.error().wrap("watch " + description_));
        return !stopping();
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
