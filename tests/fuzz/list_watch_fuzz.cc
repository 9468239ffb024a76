// The list/watch JSON the informers read (kube/watch.h, kube/decode/records.h,
// kube/decode/objects.h): the input is a watch stream (newline-delimited {"type","object"} events)
// as WatchDecoder reads it, and the same bytes are also read as one list page ({"items":[...]}) the
// way the informer reads a list. Every object (event or item) goes through what the informer does
// with it: objectKey, and the projections projectNode and projectPod (the caches' records), plus
// parseLease (leader election).
//
// Checks: decoding is the same whether the stream arrives in one chunk or in small pieces
// (same events, same error); every error message is one line; projecting twice gives equal
// records (interning is stable); a record's roles are sorted, its ekco annotations sorted and
// all under the ekco prefix, and no more containers are ready than reported.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kube/decode/json_depth.h"
#include "kube/decode/objects.h"
#include "kube/decode/records.h"
#include "kube/watch.h"
#include "kube/watch/informer.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using ekco::fuzz::check;
using ekco::fuzz::checkOneLine;
using Json = nlohmann::json;

struct Decoded {
  std::vector<std::pair<int, Json>> events;  // type, object
  std::optional<std::string> error;
};

// Decodes `text` fed in pieces of the given sizes (cycled); 0 means all at once.
Decoded decode(std::string_view text, const std::vector<std::size_t>& pieces) {
  ekco::kube::WatchDecoder decoder("watch nodes");
  Decoded out;
  bool keep_going = true;
  auto handler = [&](const ekco::kube::WatchEvent& e) {
    out.events.emplace_back(static_cast<int>(e.type), e.object);
    return true;
  };
  std::size_t at = 0;
  for (std::size_t i = 0; at < text.size(); ++i) {
    const std::size_t n = pieces.empty() ? text.size() : pieces[i % pieces.size()];
    auto s = decoder.feed(text.substr(at, n), handler, keep_going);
    at += n;
    if (!s) {
      out.error = s.error().message();
      return out;
    }
  }
  auto s = decoder.finish(handler, keep_going);
  if (!s) out.error = s.error().message();
  return out;
}

void checkNode(const Json& object) {
  auto a = ekco::kube::projectNode(object);
  auto b = ekco::kube::projectNode(object);
  check(a.has_value() == b.has_value(), "projectNode is not deterministic", object.dump());
  if (!a) {
    checkOneLine(a.error().message(), "projectNode error");
    return;
  }
  check(*a == *b, "projectNode gave unequal records for one object", object.dump());
  check(std::is_sorted(a->roles.begin(), a->roles.end(),
                       [](auto x, auto y) { return x.view() < y.view(); }),
        "node roles not sorted", object.dump());
  check(std::is_sorted(a->ekco_annotations.begin(), a->ekco_annotations.end()),
        "ekco annotations not sorted", object.dump());
  for (const auto& [key, value] : a->ekco_annotations) {
    check(key.starts_with(ekco::kube::kEkcoAnnotationPrefix), "a foreign annotation kept", key);
  }
}

void checkPod(const Json& object) {
  auto a = ekco::kube::projectPod(object);
  auto b = ekco::kube::projectPod(object);
  check(a.has_value() == b.has_value(), "projectPod is not deterministic", object.dump());
  if (!a) {
    checkOneLine(a.error().message(), "projectPod error");
    return;
  }
  check(*a == *b, "projectPod gave unequal records for one object", object.dump());
  check(a->containers_ready <= a->containers, "more containers ready than reported", object.dump());
}

void checkObject(const Json& object) {
  auto key = ekco::kube::objectKey(object);
  if (!key) checkOneLine(key.error().message(), "objectKey error");
  checkNode(object);
  checkPod(object);
  auto lease = ekco::kube::parseLease(object);
  if (!lease) checkOneLine(lease.error().message(), "parseLease error");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = ekco::fuzz::asText(data, size);

  // (1) A watch stream.
  const Decoded whole = decode(text, {});
  const Decoded pieces = decode(text, {1, 7, 2, 64, 3});
  check(whole.events == pieces.events, "events differ with the chunking", text);
  check(whole.error == pieces.error, "the error differs with the chunking", text);
  if (whole.error) checkOneLine(*whole.error, "WatchDecoder error");
  for (const auto& [type, object] : whole.events) checkObject(object);

  // (2) A list page, as RestClient::executeJson reads a response: refused when nested too deep.
  if (ekco::kube::jsonNestedDeeperThan(text)) return 0;
  const Json page = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (page.is_object()) {
    auto items = page.find("items");
    if (items != page.end() && items->is_array()) {
      for (const Json& item : *items) checkObject(item);
    }
  }
  return 0;
}
