// Watch streams: newline-delimited JSON events ({"type":"ADDED","object":{...}}) as the API
// server sends them on a watch=true GET, decoded from arbitrarily split chunks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/memory_budget.h"
#include "base/result.h"
#include "kube/decode/json_text.h"

namespace ekco::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  // The object; for a bookmark only kind, apiVersion and metadata.resourceVersion.
  nlohmann::json object{};
};

struct WatchOptions {
  // Start after this version ("" or "0": the current state first, as ADDED events).
  std::string resource_version{};
  bool allow_watch_bookmarks = true;
  // The server ends the stream after this long (the caller then watches again from the last
  // resourceVersion it saw); the client gives up 30 s later if the server does not.
  std::int64_t timeout_seconds = 290;
  // A stream that carries no byte (no event, no bookmark) for this long is dead: kTimeout.
  // kube-apiserver sends a bookmark about once a minute to a watch that asked for them, so a
  // healthy quiet stream is never this silent. 0: no bound.
  std::chrono::milliseconds idle_timeout{0};
  std::string label_selector{};
  std::string field_selector{};
  // Called once the server has accepted the watch (a 2xx status and headers), before any
  // event: the API is reachable even if nothing changes for minutes.
  std::function<void()> on_open{};
};

// Returns false to end the watch (not an error).
using WatchHandler = std::function<bool(const WatchEvent& event)>;

// One line of a watch stream as text (trimmed, never empty, padded for simdjson: see
// kube/decode/json_text.h). An error ends the stream with it; keep_going false ends it quietly.
using WatchLineHandler = std::function<base::Status(JsonText line, bool& keep_going)>;

// Decodes one event line (trimmed, not empty) with nlohmann: the event, or the error: an ERROR
// event's Status (410 Expired is kGone), a line that is not an event. Messages start with `op`.
base::Result<WatchEvent> parseWatchEvent(std::string_view text, const std::string& op);

// Splits chunks into lines and lines into events. An ERROR event (a Status: 410 Expired when
// the resourceVersion is too old) and malformed lines become errors: feed returns the first one
// and the stream should be abandoned.
class WatchDecoder {
 public:
  // One event is one object, which etcd bounds at ~1.5 MiB (a little more as JSON); a line this
  // long is not an event but a broken or hostile stream, and holding more of it would only grow
  // the agent's memory.
  static constexpr std::size_t kMaxLineBytes = std::size_t{8} << 20;

  // `op` prefixes error messages ("watch pods in default"). A line (an event) longer than
  // `max_line_bytes` is a kParse error; what the decoder holds stays below about that much.
  // What it holds is charged to `budget` (base/memory_budget.h) when one is given: a line the
  // budget cannot hold is a kIo error, and the stream should be dropped as for any other.
  explicit WatchDecoder(std::string op, std::size_t max_line_bytes = kMaxLineBytes,
                        base::MemoryBudget* budget = nullptr)
      : op_(std::move(op)), max_line_bytes_(max_line_bytes), share_(budget) {}

  // Decodes every complete line in `chunk` (with what is left from earlier chunks) and calls
  // the handler for each event. Returns false in `keep_going` when the handler asked to stop.
  base::Status feed(std::string_view chunk, const WatchHandler& handler, bool& keep_going);
  // Called at the end of the stream: a trailing line without a newline is decoded too.
  base::Status finish(const WatchHandler& handler, bool& keep_going);

  // The same, handing each line's text to `on_line` undecoded (the informer decodes it with
  // simdjson, kube/watch/list_decode.h).
  base::Status feedLines(std::string_view chunk, const WatchLineHandler& on_line, bool& keep_going);
  base::Status finishLines(const WatchLineHandler& on_line, bool& keep_going);

 private:
  base::Status line(std::string_view text, const WatchHandler& handler, bool& keep_going);
  void dropPending();

  std::string op_;
  std::size_t max_line_bytes_;
  std::string pending_;
  base::BudgetShare share_;  // pending_'s capacity
};

}  // namespace ekco::kube
