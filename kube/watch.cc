#include "kube/watch.h"

#include <fmt/format.h>

#include "base/strings.h"
#include "kube/decode/json_depth.h"
#include "kube/errors.h"

namespace ekco::kube {

using base::Error;
using base::ErrorCode;

namespace {

// A watch's buffer keeps up to this much capacity between lines (typical events are a few KiB).
constexpr std::size_t kKeptLineCapacity = std::size_t{256} << 10;

std::string_view trimLine(std::string_view text) {
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
  return text;
}

}  // namespace

base::Status WatchDecoder::feed(std::string_view chunk, const WatchHandler& handler,
                                bool& keep_going) {
  return feedLines(
      chunk, [&](JsonText text, bool& keep) { return line(text.text, handler, keep); }, keep_going);
}

base::Status WatchDecoder::feedLines(std::string_view chunk, const WatchLineHandler& on_line,
                                     bool& keep_going) {
  // Every line handed out is followed by kJsonPadding readable bytes of pending_.
  if (!base::appendWithin(pending_, chunk, share_, kJsonPadding)) {
    dropPending();
    return Error(fmt::format("{}: {} cannot hold more of a watch event; dropping the stream", op_,
                             base::describeBufferBudget(*share_.budget())),
                 ErrorCode::kIo);
  }
  std::size_t start = 0;
  for (std::size_t nl; keep_going && (nl = pending_.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    const std::string_view text = trimLine(std::string_view(pending_).substr(start, nl - start));
    if (text.empty()) continue;
    EKCO_TRY(on_line({.text = text, .capacity = pending_.capacity() - start}, keep_going));
  }
  pending_.erase(0, start);
  // After a long line, what is left is usually a short start of the next one.
  base::trimWithin(pending_, share_, kKeptLineCapacity);
  if (keep_going && pending_.size() > max_line_bytes_) {
    dropPending();
    return Error(op_ + ": a watch event is longer than " + base::describeBytes(max_line_bytes_) +
                     " without a newline; dropping the stream",
                 ErrorCode::kParse);
  }
  return base::ok();
}

void WatchDecoder::dropPending() {
  pending_ = std::string();
  (void)share_.resize(0);
}

base::Status WatchDecoder::finish(const WatchHandler& handler, bool& keep_going) {
  return finishLines([&](JsonText text, bool& keep) { return line(text.text, handler, keep); },
                     keep_going);
}

base::Status WatchDecoder::finishLines(const WatchLineHandler& on_line, bool& keep_going) {
  if (!keep_going || pending_.empty()) return base::ok();
  std::string last = std::move(pending_);
  pending_ = std::string();
  (void)share_.resize(0);  // `last` ends with this call
  const std::size_t size = trimLine(last).size();
  if (size == 0) return base::ok();
  last.resize(size);
  return on_line(padded(last), keep_going);
}

base::Status WatchDecoder::line(std::string_view text, const WatchHandler& handler,
                                bool& keep_going) {
  auto event = parseWatchEvent(text, op_);
  if (!event) return std::move(event).error();
  keep_going = handler(*event);
  return base::ok();
}

base::Result<WatchEvent> parseWatchEvent(std::string_view text, const std::string& op) {
  if (jsonNestedDeeperThan(text)) {
    return Error(
        op + ": watch event nested deeper than " + std::to_string(kMaxJsonDepth) + " levels",
        ErrorCode::kParse);
  }
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  // The line is quoted and escaped (at most 120 bytes of it): a server can put any byte in it,
  // and the message must stay one line.
  auto bad = [&](std::string_view why) {
    return Error(op + ": " + std::string(why) + ": " + base::quoteForMessage(text, 120),
                 ErrorCode::kParse);
  };
  if (!json.is_object()) return bad("watch event is not a JSON object");
  const auto type = json.find("type");
  const auto object = json.find("object");
  if (type == json.end() || !type->is_string() || object == json.end() || !object->is_object()) {
    return bad("watch event without type or object");
  }
  const std::string name = type->get<std::string>();
  WatchEvent event;
  if (name == "ADDED") {
    event.type = WatchEventType::kAdded;
  } else if (name == "MODIFIED") {
    event.type = WatchEventType::kModified;
  } else if (name == "DELETED") {
    event.type = WatchEventType::kDeleted;
  } else if (name == "BOOKMARK") {
    event.type = WatchEventType::kBookmark;
  } else if (name == "ERROR") {
    auto status = parseStatus(object->dump());
    if (!status) return bad("ERROR event without a Status");
    return statusError(op, *status);
  } else {
    return bad("unknown watch event type");
  }
  event.object = *object;
  return event;
}

}  // namespace ekco::kube
