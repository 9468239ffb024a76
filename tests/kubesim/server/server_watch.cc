// ekco-kubesim: watch streams (events, bookmarks, 410 Gone, faults).
#include "tests/kubesim/features/events.h"
#include "tests/kubesim/features/table.h"
#include "tests/kubesim/server/server_impl.h"
#include "tests/kubesim/store/list_options.h"

namespace ekco::kubesim {

using namespace server_detail;  // NOLINT(google-build-using-namespace): this server's internals

// One stream's life (replay, live events, bookmarks, injected drops, timeout) over state its
// loop shares; kept whole.
void Server::Impl::serveWatch(SslStream& stream, const Request& req, const ResourceInfo& r,
                              const ParsedRoute& route, const Query& query) {
  // Selectors were validated by serveResource.
  LabelSelector labels = *LabelSelector::parse(queryValue(query, "labelSelector"));
  // The events.k8s.io view watches the core/v1 events it is made of (events.h).
  const bool view = events::isView(r);
  const ResourceInfo storage = view ? *store_.findResource("", "v1", "events") : r;
  std::string field_text = queryValue(query, "fieldSelector");
  if (view) field_text = events::coreFieldSelector(field_text).value_or("");
  FieldSelector fields = *fieldSelectorFor(storage, field_text);
  const bool bookmarks = queryFlag(query, "allowWatchBookmarks");
  const auto timeout =
      std::chrono::seconds(toInt(queryValue(query, "timeoutSeconds")).value_or(1800));
  const std::string rv_text = queryValue(query, "resourceVersion");
  // sendInitialEvents (validated with resourceVersionMatch=NotOlderThan by serveCollection):
  // true streams the current state as ADDED events whatever the resourceVersion, then (with
  // bookmarks) a BOOKMARK annotated k8s.io/initial-events-end; false starts at the current state
  // without them. Unset: a watch without resourceVersion (or "0") starts with them, as before.
  std::optional<bool> initial_events;
  if (std::string s = queryValue(query, "sendInitialEvents"); !s.empty()) {
    initial_events = parseGoBool(s).value_or(false);
  }
  Faults faults;
  bool force_gone = false;
  {
    std::lock_guard lock(mu_);
    faults = faults_;
    force_gone = std::exchange(force_gone_, false);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;

  http::response<http::empty_body> res{http::status::ok, req.version()};
  res.set(http::field::server, "kubesim");
  res.set(http::field::content_type, "application/json");
  res.chunked(true);
  res.keep_alive(false);
  http::response_serializer<http::empty_body> serializer{res};
  int sent = 0;
  try {
    http::write_header(stream, serializer);
    // `kubectl get --watch` asks for Tables: each event's object is a one-row Table.
    const std::string as_table =
        table::wantsTable(std::string(req[http::field::accept])).value_or("");
    auto send = [&](json event) {
      json table_event;
      const bool has_object =
          event.value("type", "") != "ERROR" && event.value("type", "") != "BOOKMARK";
      if (!as_table.empty() && has_object) {
        table_event = {
            {"type", event["type"]},
            {"object", table::toTable(storage, event["object"], queryValue(query, "includeObject"),
                                      clock_->wallNow())}};
      } else if (view && has_object) {
        event["object"] = events::toView(event["object"]);
      }
      std::string line = (table_event.is_null() ? event : table_event).dump() + "\n";
      net::write(stream, http::make_chunk(net::buffer(line)));
    };
    auto finish = [&] { net::write(stream, http::make_chunk_last()); };
    std::uint64_t last = 0;
    const bool from_now = rv_text.empty() || rv_text == "0";
    if (initial_events.value_or(from_now)) {
      // The current state as synthetic ADDED events, then changes.
      ListOptions options = selectorsOnly(query);
      options.field_selector = field_text;
      Reply listed = store_.list(storage, route.ns, options);
      last = std::stoull(listed.body["metadata"]["resourceVersion"].get<std::string>());
      for (const json& item : listed.body["items"]) {
        if (faults.drop_watch_after_events > 0 && sent >= faults.drop_watch_after_events) break;
        send({{"type", "ADDED"}, {"object", item}});
        ++sent;
      }
    } else if (from_now) {
      last = store_.resourceVersion();
    } else {
      last = static_cast<std::uint64_t>(*toInt(rv_text));
    }
    auto bookmark = [&](bool initial_events_end) {
      json meta = {{"resourceVersion", std::to_string(last)}};
      if (initial_events_end) meta["annotations"] = {{"k8s.io/initial-events-end", "true"}};
      send({{"type", "BOOKMARK"},
            {"object", {{"kind", r.kind}, {"apiVersion", r.apiVersion()}, {"metadata", meta}}}});
    };
    if (initial_events.value_or(false) && bookmarks && !force_gone) bookmark(true);
    if (force_gone) {
      send(goneEvent(last, store_.resourceVersion()));
      finish();
      return;
    }
    // The first periodic bookmark comes one interval in, never at the start of the stream.
    auto next_bookmark = start + options_.bookmark_interval;
    while (!stopping_ &&
           !(faults.drop_watch_after_events > 0 && sent >= faults.drop_watch_after_events)) {
      {
        // Faults set while the stream is open apply to it too (an outage cuts open watches).
        std::lock_guard lock(mu_);
        faults = faults_;
      }
      if (faults.hang || faults.stall_watches) {
        // Silent: no event, no bookmark, for as long as the fault lasts (or the watch's time).
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      std::uint64_t scanned = last;
      auto changes = store_.eventsAfter(last, storage.key(), &scanned);
      if (!changes) {
        // The apiserver's watch cache answers a too-old resourceVersion with an ERROR event
        // (HTTP 200): Status code 410, reason Expired.
        send(goneEvent(last, store_.resourceVersion()));
        break;
      }
      for (const WatchEvent& e : *changes) {
        auto type = filteredType(e, route.ns, labels, fields);
        if (!type) continue;
        send({{"type", *type}, {"object", e.object}});
        ++sent;
        if (faults.drop_watch_after_events > 0 && sent >= faults.drop_watch_after_events) break;
      }
      last = scanned;
      auto now = std::chrono::steady_clock::now();
      if (faults.drop_watch_after_events > 0 && sent >= faults.drop_watch_after_events) break;
      if (faults.drop_watch_after.count() > 0 && now - start >= faults.drop_watch_after) break;
      if (now >= deadline) break;
      if (bookmarks && now >= next_bookmark) {
        bookmark(false);
        next_bookmark = now + options_.bookmark_interval;
      }
      auto wake = deadline;
      if (bookmarks) wake = std::min(wake, next_bookmark);
      if (faults.drop_watch_after.count() > 0)
        wake = std::min(wake, start + faults.drop_watch_after);
      wake = std::min(wake, now + std::chrono::milliseconds(500));
      store_.waitForChange(last, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now) +
                                     std::chrono::milliseconds(1));
      if (store_.isShutdown()) break;
    }
    finish();
  } catch (const std::exception&) {
    // The watcher went away.
  }
}

}  // namespace ekco::kubesim
