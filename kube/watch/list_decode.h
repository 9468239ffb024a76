// The informer's reading of list pages and watch lines with simdjson's On-Demand API, straight
// from the bytes the server sent (no DOM): a page yields its metadata and each item's text, a
// watch line its type and object text; the records are then decoded from those texts
// (decodeNode / decodePod in kube/decode/records.h), each item on its own, so one malformed object
// is an error for that object only.
//
// Errors are one line, kParse, with the same wording as before simdjson (the informer's tests
// pin it): "response is not JSON", "response is not a List (no items or metadata)", and for watch
// lines those of WatchDecoder (kube/watch.h), which decodes the rare odd line (not an event,
// an ERROR Status) so that both agree.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "kube/decode/json_text.h"
#include "kube/watch.h"

namespace ekco::kube {

struct ListPage {
  std::string resource_version{};
  std::string continue_token{};
  // Each item's text, in order; an empty text for an item that is not a JSON object.
  std::vector<JsonText> items{};
};

struct WatchLine {
  WatchEventType type = WatchEventType::kAdded;
  JsonText object{};  // the event's object
};

// Holds simdjson's parsers (their buffers grow to the largest document read). One per thread
// of use; release() frees the buffers after a list, so no page stays resident.
class JsonDecoder {
 public:
  JsonDecoder();
  ~JsonDecoder();
  JsonDecoder(const JsonDecoder&) = delete;
  JsonDecoder& operator=(const JsonDecoder&) = delete;

  // One page of a list. The items point into `page`, which must outlive them. `op` prefixes
  // errors ("list pods in all namespaces").
  base::Result<ListPage> listPage(JsonText page, std::string_view op);
  // One line of a watch stream (not empty). The object points into `line` or into `scratch`.
  base::Result<WatchLine> watchLine(JsonText line, std::string_view op, std::string& scratch);
  // Frees the parsers' buffers.
  void release();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ekco::kube
