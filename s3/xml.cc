#include "s3/xml.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "base/strings.h"

namespace ekco::s3 {

using base::Error;
using base::ErrorCode;
using base::Result;

namespace {

// The raw text of each <tag>...</tag> in `xml`, in order (not nested in itself).
Result<std::vector<std::string_view>> elements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  const std::string open = fmt::format("<{}>", tag);
  const std::string empty = fmt::format("<{}/>", tag);
  const std::string close = fmt::format("</{}>", tag);
  std::size_t pos = 0;
  while (true) {
    const std::size_t a = xml.find(open, pos);
    const std::size_t e = xml.find(empty, pos);
    if (e != std::string_view::npos && (a == std::string_view::npos || e < a)) {
      out.emplace_back();
      pos = e + empty.size();
      continue;
    }
    if (a == std::string_view::npos) break;
    const std::size_t b = xml.find(close, a + open.size());
    if (b == std::string_view::npos) {
      return Error(fmt::format("S3 answer: <{}> is not closed", tag), ErrorCode::kParse);
    }
    out.push_back(xml.substr(a + open.size(), b - a - open.size()));
    pos = b + close.size();
  }
  return out;
}

Result<std::optional<std::string>> child(std::string_view xml, std::string_view tag) {
  auto found = elements(xml, tag);
  if (!found) return std::move(found).error();
  if (found->empty()) return std::optional<std::string>();
  auto text = xmlUnescape(found->front());
  if (!text) return std::move(text).error();
  return std::optional<std::string>(std::move(*text));
}

void appendUtf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

Result<std::string> xmlUnescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out += text[i];
      continue;
    }
    const std::size_t semi = text.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) {
      return Error("S3 answer: an unterminated entity in the text", ErrorCode::kParse);
    }
    const std::string_view name = text.substr(i + 1, semi - i - 1);
    if (name == "amp") {
      out += '&';
    } else if (name == "lt") {
      out += '<';
    } else if (name == "gt") {
      out += '>';
    } else if (name == "quot") {
      out += '"';
    } else if (name == "apos") {
      out += '\'';
    } else if (name.size() > 1 && name[0] == '#') {
      const bool is_hex = name[1] == 'x' || name[1] == 'X';
      const std::string_view digits = name.substr(is_hex ? 2 : 1);
      std::uint32_t cp = 0;
      auto [end, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), cp, is_hex ? 16 : 10);
      if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
          cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        return Error(fmt::format("S3 answer: a bad character reference {}",
                                 base::quoteForMessage("&" + std::string(name) + ";")),
                     ErrorCode::kParse);
      }
      appendUtf8(out, cp);
    } else {
      return Error(fmt::format("S3 answer: an unknown entity {}",
                               base::quoteForMessage("&" + std::string(name) + ";")),
                   ErrorCode::kParse);
    }
    i = semi;
  }
  return out;
}

Result<std::string> urlDecode(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] != '%') {
      out += text[i];
    } else {
      const int hi = i + 2 < text.size() ? hex(text[i + 1]) : -1;
      const int lo = hi >= 0 ? hex(text[i + 2]) : -1;
      if (lo < 0) {
        return Error(fmt::format("S3 answer: a bad URL escape in {}",
                                 base::quoteForMessage(std::string(text))),
                     ErrorCode::kParse);
      }
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return out;
}

std::string normalizeEtag(std::string_view etag) {
  std::string out;
  for (char c : etag) {
    if (c == '"') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Result<std::vector<std::string>> parseListBuckets(std::string_view xml) {
  if (xml.find("<ListAllMyBucketsResult") == std::string_view::npos) {
    return Error("S3 answer: not a ListAllMyBucketsResult", ErrorCode::kParse);
  }
  auto buckets = elements(xml, "Bucket");
  if (!buckets) return std::move(buckets).error();
  std::vector<std::string> out;
  for (std::string_view b : *buckets) {
    auto name = child(b, "Name");
    if (!name) return std::move(name).error();
    if (!*name || (*name)->empty()) {
      return Error("S3 answer: a Bucket without a Name", ErrorCode::kParse);
    }
    out.push_back(std::move(**name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<ObjectPage> parseListObjectsV2(std::string_view xml) {
  if (xml.find("<ListBucketResult") == std::string_view::npos) {
    return Error("S3 answer: not a ListBucketResult", ErrorCode::kParse);
  }
  ObjectPage page;
  // The root's own elements (IsTruncated, NextContinuationToken, EncodingType) come before the
  // first Contents or after the last.
  const std::size_t tail = xml.rfind("</Contents>");
  const std::string_view rest = tail == std::string_view::npos ? xml : xml.substr(tail);
  const std::string_view head =
      tail == std::string_view::npos ? xml : xml.substr(0, xml.find("<Contents>"));
  bool url_encoded = false;
  for (std::string_view part : {head, rest}) {
    auto encoding = child(part, "EncodingType");
    if (!encoding) return std::move(encoding).error();
    if (*encoding && strcasecmp(std::string(base::trimSpace(**encoding)).c_str(), "url") == 0) {
      url_encoded = true;
    }
  }
  auto contents = elements(xml, "Contents");
  if (!contents) return std::move(contents).error();
  for (std::string_view c : *contents) {
    ObjectInfo o;
    auto key = child(c, "Key");
    auto size = child(c, "Size");
    auto etag = child(c, "ETag");
    for (auto* r : {&key, &size, &etag}) {
      if (!*r) return std::move(*r).error();
    }
    if (!*key || !*size) return Error("S3 answer: Contents without Key or Size", ErrorCode::kParse);
    if (url_encoded) {
      auto decoded = urlDecode(**key);
      if (!decoded) return std::move(decoded).error();
      o.key = std::move(*decoded);
    } else {
      o.key = std::move(**key);
    }
    const std::string& s = **size;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), o.size);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
      return Error(fmt::format("S3 answer: object {} has a bad Size {}",
                               base::quoteForMessage(o.key), base::quoteForMessage(s)),
                   ErrorCode::kParse);
    }
    if (*etag) o.etag = normalizeEtag(**etag);
    page.objects.push_back(std::move(o));
  }
  for (std::string_view part : {head, rest}) {
    auto truncated = child(part, "IsTruncated");
    if (!truncated) return std::move(truncated).error();
    if (*truncated) page.truncated = **truncated == "true";
    auto token = child(part, "NextContinuationToken");
    if (!token) return std::move(token).error();
    if (*token) page.next_token = std::move(**token);
  }
  if (page.truncated && page.next_token.empty()) {
    return Error("S3 answer: truncated without a NextContinuationToken", ErrorCode::kParse);
  }
  return page;
}

S3Error parseError(std::string_view xml) {
  S3Error e;
  auto code = child(xml, "Code");
  if (code && *code) e.code = **code;
  auto message = child(xml, "Message");
  if (message && *message) e.message = **message;
  if (e.code.empty() && e.message.empty()) e.message = std::string(xml.substr(0, 200));
  return e;
}

}  // namespace ekco::s3
