// The informers' simdjson path (kube/watch/list_decode.h; decodeNode / decodePod in
// kube/decode/records.h): the input is read as one list page and as a watch stream split into lines
// (as RestClient splits it), and every object found is decoded into both records.
//
// Checks: every error is one line; decoding is deterministic; and wherever the input is valid
// JSON, each object's record from its text equals the DOM projection's (projectNode /
// projectPod over the same canonical text), success or failure alike — the decoders must not
// change what the caches hold.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kube/decode/json_depth.h"
#include "kube/decode/records.h"
#include "kube/watch.h"
#include "kube/watch/informer.h"
#include "kube/watch/list_decode.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using ekco::fuzz::check;
using ekco::fuzz::checkOneLine;
using ekco::kube::JsonText;
using ekco::kube::ObjectMeta;
using Json = nlohmann::json;

void decodeItem(JsonText object) {
  ObjectMeta meta_a;
  ObjectMeta meta_b;
  auto node = ekco::kube::decodeNode(object, meta_a);
  auto node_again = ekco::kube::decodeNode(object, meta_b);
  check(node.has_value() == node_again.has_value(), "decodeNode is not deterministic", object.text);
  if (!node) checkOneLine(node.error().message(), "decodeNode error");
  if (node && node_again) check(*node == *node_again, "decodeNode unequal twice", object.text);
  auto pod = ekco::kube::decodePod(object, meta_a);
  if (!pod) {
    checkOneLine(pod.error().message(), "decodePod error");
  } else {
    check(pod->containers_ready <= pod->containers, "more containers ready than reported",
          object.text);
  }
  ObjectMeta meta;
  (void)ekco::kube::decodeMeta(object, meta);
}

// The decoders against the DOM projections on one object's canonical text.
void compare(const Json& object) {
  if (!object.is_object() || !ekco::kube::objectKey(object)) return;
  std::string text = object.dump();
  const Json canonical = Json::parse(text);  // what the DOM path would have read
  ObjectMeta meta;
  auto node = ekco::kube::decodeNode(ekco::kube::padded(text), meta);
  auto dom_node = ekco::kube::projectNode(canonical);
  check(node.has_value() == dom_node.has_value(), "decodeNode and projectNode disagree", text);
  if (node) check(*node == *dom_node, "decodeNode and projectNode give unequal records", text);
  auto pod = ekco::kube::decodePod(ekco::kube::padded(text), meta);
  auto dom_pod = ekco::kube::projectPod(canonical);
  check(pod.has_value() == dom_pod.has_value(), "decodePod and projectPod disagree", text);
  if (pod) check(*pod == *dom_pod, "decodePod and projectPod give unequal records", text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = ekco::fuzz::asText(data, size);

  // (1) A list page.
  {
    std::string page(text);
    ekco::kube::JsonDecoder decoder;
    auto decoded = decoder.listPage(ekco::kube::padded(page), "list pods");
    if (!decoded) {
      checkOneLine(decoded.error().message(), "listPage error");
    } else {
      for (const JsonText& item : decoded->items) {
        if (!item.text.empty()) decodeItem(item);
      }
    }
  }

  // (2) A watch stream, line by line.
  {
    ekco::kube::JsonDecoder decoder;
    ekco::kube::WatchDecoder lines("watch pods");
    std::string scratch;
    bool keep_going = true;
    auto on_line = [&](JsonText line, bool&) -> ekco::base::Status {
      auto event = decoder.watchLine(line, "watch pods", scratch);
      if (!event) {
        checkOneLine(event.error().message(), "watchLine error");
        return ekco::base::ok();
      }
      decodeItem(event->object);
      return ekco::base::ok();
    };
    auto fed = lines.feedLines(text, on_line, keep_going);
    if (!fed) checkOneLine(fed.error().message(), "feedLines error");
    auto finished = lines.finishLines(on_line, keep_going);
    if (!finished) checkOneLine(finished.error().message(), "finishLines error");
  }

  // (3) Valid JSON: the decoders agree with the DOM projections.
  if (ekco::kube::jsonNestedDeeperThan(text)) return 0;
  const Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_object()) {
    compare(json);
    if (auto items = json.find("items"); items != json.end() && items->is_array()) {
      for (const Json& item : *items) compare(item);
    }
    if (auto object = json.find("object"); object != json.end()) compare(*object);
  }
  return 0;
}
