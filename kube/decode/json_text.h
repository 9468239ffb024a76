// JSON text handed to the simdjson decoders (kube/watch/list_decode.h,
// kube/decode/record_decode.cc) without a copy. simdjson reads whole SIMD blocks and may read up to
// kJsonPadding bytes past the end of the text, so every JsonText promises that many readable bytes
// after it (the rest of a list page, or a buffer reserved that much larger). Only the pointer is
// read ahead; the bytes there are never part of the value.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ekco::kube {

// Equal to SIMDJSON_PADDING (checked where simdjson is included).
inline constexpr std::size_t kJsonPadding = 64;

struct JsonText {
  std::string_view text{};
  // Readable bytes from text.data(): at least text.size() + kJsonPadding.
  std::size_t capacity = 0;
};

// `s` as JsonText, growing its capacity (not its size) by the padding when needed.
inline JsonText padded(std::string& s) {
  if (s.capacity() < s.size() + kJsonPadding) s.reserve(s.size() + kJsonPadding);
  return {.text = std::string_view(s), .capacity = s.capacity()};
}

// The metadata every cached object is keyed by, filled by a decoder.
struct ObjectMeta {
  std::string name{};
  std::string ns{};
  std::string resource_version{};
};

}  // namespace ekco::kube
