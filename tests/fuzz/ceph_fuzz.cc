// The rook-ceph controller's readers of `ceph` output (rook/ceph_policy.h): parseOsdTree on
// `ceph osd tree -f json` and safeToDestroy on `ceph osd safe-to-destroy -f json`, both text a
// pod's exec returns.
//
// Checks: an accepted tree's up hosts are hosts of the tree, each backed by an up OSD that names
// it; down_in() is a subset of down(); every OSD listed sits under a host; a rejected text gets
// a one-line kParse message; safeToDestroy of no ids is true whenever the text is accepted.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "rook/ceph_policy.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ekco::fuzz::check;
  const std::string_view text = ekco::fuzz::asText(data, size);
  auto tree = ekco::rook::parseOsdTree(text);
  if (tree) {
    for (const auto& host : tree->up_hosts) {
      check(tree->hosts.count(host) == 1, "an up host is a host", host);
      check(std::any_of(tree->osds.begin(), tree->osds.end(),
                        [&](const auto& o) { return o.up && o.host == host; }),
            "an up host has an up OSD", host);
    }
    for (const auto& o : tree->osds) check(tree->hosts.count(o.host) == 1, "an OSD has a host");
    const auto down = tree->down();
    for (auto id : tree->down_in()) {
      check(std::find(down.begin(), down.end(), id) != down.end(), "down_in within down");
    }
  } else {
    check(tree.error().code() == ekco::base::ErrorCode::kParse, "a rejection is kParse");
    check(tree.error().message().find('\n') == std::string::npos, "one line",
          tree.error().message());
  }
  auto safe = ekco::rook::safeToDestroy(text, {});
  if (safe) check(*safe, "no ids are always safe");
  return 0;
}
