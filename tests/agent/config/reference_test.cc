// The configuration reference generated from the key table (agent/config/reference.h):
// `config show --explain`, the Markdown of docs/configuration.md and the ekco-config(5) page.
#include "agent/config/reference.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/config/config.h"

namespace ekco::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(ConfigReference, ExplainsAKeyWithEverythingTheReferenceSays) {
  auto text = explainKey("node_unreachable_toleration");
  ASSERT_TRUE(text) << text.error().message();
  EXPECT_THAT(*text, StartsWith("node_unreachable_toleration: How long a node must be "));
  EXPECT_THAT(*text, HasSubstr("  type         duration\n"));
  EXPECT_THAT(*text, HasSubstr("  default      5m\n"));
  EXPECT_THAT(*text, HasSubstr("  environment  EKCO_NODE_UNREACHABLE_TOLERATION\n"));
  EXPECT_THAT(*text, HasSubstr("  flag         --node-unreachable-toleration\n"));
  EXPECT_THAT(*text, HasSubstr("  kURL         spec.ekco.nodeUnreachableToleration (its value)\n"));
  EXPECT_THAT(*text, HasSubstr("  EKCO         EKCO's binary default is 1h"));
  EXPECT_THAT(*text, HasSubstr("  status       acted on\n"));
  EXPECT_THAT(*text, HasSubstr("docs/configuration.md#key-node_unreachable_toleration"));
  // The flag's spelling finds it too.
  auto flag = explainKey("node-unreachable-toleration");
  ASSERT_TRUE(flag);
  EXPECT_EQ(*flag, *text);
}

TEST(ConfigReference, SaysWhatIsNewIgnoredCompatOrAnAlias) {
  EXPECT_THAT(*explainKey("storm_guard_percent"), HasSubstr("  EKCO         new in ekco\n"));
  EXPECT_THAT(*explainKey("purge_dead_nodes"), HasSubstr("  EKCO         as in EKCO\n"));
  const std::string ignored = *explainKey("rook_version");
  EXPECT_THAT(ignored, HasSubstr("  status       ignored: "));
  EXPECT_THAT(ignored, Not(HasSubstr("  default")));
  EXPECT_THAT(*explainKey("rook_minimum_node_count"),
              HasSubstr("  status       no effect in ekco (a warning when set"));
  EXPECT_THAT(*explainKey("contour_cert_namespace"),
              HasSubstr("  status       alias of contour_namespace\n"));
  // A key kURL sets from an add-on's presence and from a negated field.
  const std::string rook = *explainKey("maintain_rook_storage_nodes");
  EXPECT_THAT(rook, HasSubstr("  kURL         spec.rook (true when Rook is present)\n"));
  EXPECT_THAT(rook, HasSubstr("  kURL         spec.ekco.rookShouldUseAllNodes (negated; false "
                              "without Rook)\n"));
}

TEST(ConfigReference, AnUnknownKeyIsOneLineWithTheClosestKeys) {
  auto text = explainKey("purge_dead_node");
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().code(), base::ErrorCode::kNotFound);
  EXPECT_EQ(text.error().message(),
            "\"purge_dead_node\": no such key (did you mean purge_dead_nodes?)");
  auto nothing_near = explainKey("zzzzzzzzzzzzzzzz");
  ASSERT_FALSE(nothing_near);
  EXPECT_EQ(nothing_near.error().message(), "\"zzzzzzzzzzzzzzzz\": no such key");
  // A hostile name stays one line.
  auto hostile = explainKey("a\nb");
  ASSERT_FALSE(hostile);
  EXPECT_THAT(hostile.error().message(), Not(HasSubstr("\n")));
}

TEST(ConfigReference, EveryKeyHasAnAnchoredSectionAndAManEntry) {
  const std::string md = renderConfigReference(ReferenceFormat::kMarkdown);
  const std::string man = renderConfigReference(ReferenceFormat::kMan);
  EXPECT_THAT(man, StartsWith(".TH EKCO\\-CONFIG 5 "));
  for (const KeyInfo& k : configKeys()) {
    const std::string key(k.key);
    EXPECT_THAT(md, HasSubstr("<a id=\"key-" + key + "\"></a>\n### `" + key + "`\n")) << key;
    std::string roff_key;
    for (char c : key) roff_key += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_THAT(man, HasSubstr(".TP\n.B " + roff_key + "\n")) << key;
  }
  // No line of the page starts with a control character it did not mean.
  std::size_t at = 0;
  while ((at = man.find("\n", at)) != std::string::npos) {
    ++at;
    if (at < man.size() && man[at] == '\'') ADD_FAILURE() << man.substr(at, 40);
  }
}

}  // namespace
}  // namespace ekco::agent
