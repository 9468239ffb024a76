// The pure part of HostJobs (agent/features/host_jobs/host_job_spec.h): which specs are accepted,
// the one-line rejections, node selection as Kubernetes' node affinity does it, the progress
// summary.
#include "agent/features/host_jobs/host_job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ekco::agent {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(HostJobSpec, AcceptsAnArgvWithDefaultsAndTheOptionalFields) {
  auto p = parseHostJobSpec({{"command", {"/bin/rm", "-rf", "ecs"}}});
  ASSERT_TRUE(p.spec) << p.rejection;
  EXPECT_EQ(p.spec->command, (std::vector<std::string>{"/bin/rm", "-rf", "ecs"}));
  EXPECT_EQ(p.spec->host_path, "/");
  EXPECT_EQ(p.spec->timeout, std::chrono::minutes(10));
  EXPECT_TRUE(p.spec->terms.empty());
  p = parseHostJobSpec({{"command", {"/bin/true"}}, {"hostPath", "/var/lib"}, {"timeout", "90s"}});
  ASSERT_TRUE(p.spec) << p.rejection;
  EXPECT_EQ(p.spec->host_path, "/var/lib");
  EXPECT_EQ(p.spec->timeout, std::chrono::seconds(90));
}

TEST(HostJobSpec, RejectsWhatCouldNotRunAsMeantWithOneLine) {
  struct Case {
    json spec;
    const char* why;
  };
  const std::vector<Case> cases = {
      {json(nullptr), "spec must be an object"},
      {{{"command", "rm -rf /var/lib/ecs"}}, "spec.command is a string (\"rm -rf /var/lib/ecs\")"},
      {json::object(), "spec.command must be a non-empty list"},
      {{{"command", json::array()}}, "spec.command must be a non-empty list"},
      {{{"command", {"/bin/x", 3}}}, "every argument must be a string"},
      {{{"command", {"rm", "x"}}}, "spec.command[0] \"rm\" must be an absolute program path"},
      {{{"command", {"/bin/x"}}, {"hostPath", "var"}}, "must be an absolute host path"},
      {{{"command", {"/bin/x"}}, {"hostPath", "/a/../.."}}, "leaves the host root"},
      {{{"command", {"/bin/x"}}, {"timeout", "forever"}}, "spec.timeout \"forever\""},
      {{{"command", {"/bin/x"}}, {"timeout", "48h"}}, "from 1s to 24h"},
      {{{"command", {"/bin/x"}}, {"nodeSelectorTerms", "a=b"}}, "must be a list of terms"},
      {{{"command", {"/bin/x"}},
        {"nodeSelectorTerms", {{{"matchExpressions", {{{"key", "a"}, {"operator", "Near"}}}}}}}},
       "unknown operator \"Near\""},
      {{{"command", {"/bin/x"}},
        {"nodeSelectorTerms",
         {{{"matchExpressions", {{{"key", "a"}, {"operator", "Exists"}, {"values", {"b"}}}}}}}}},
       "operator Exists takes no values"},
      {{{"command", {"/bin/x"}},
        {"nodeSelectorTerms", {{{"matchExpressions", {{{"key", "a"}, {"operator", "In"}}}}}}}},
       "operator In needs values"},
      {{{"command", {"/bin/x"}},
        {"nodeSelectorTerms",
         {{{"matchExpressions", {{{"key", "a"}, {"operator", "Gt"}, {"values", {"x"}}}}}}}}},
       "needs an integer"},
      {{{"command", {"/bin/x"}},
        {"nodeSelectorTerms",
         {{{"matchFields", {{{"key", "spec.x"}, {"operator", "In"}, {"values", {"b"}}}}}}}}},
       "matchFields supports only metadata.name"},
  };
  for (const Case& c : cases) {
    const ParsedHostJob p = parseHostJobSpec(c.spec);
    EXPECT_FALSE(p.spec) << c.spec.dump();
    EXPECT_THAT(p.rejection, HasSubstr(c.why)) << c.spec.dump();
    EXPECT_EQ(p.rejection.find('\n'), std::string::npos);
  }
}

TEST(HostJobSpec, SelectsNodesAsNodeAffinityDoes) {
  auto spec = [](json terms) {
    auto p = parseHostJobSpec({{"command", {"/bin/x"}}, {"nodeSelectorTerms", terms}});
    EXPECT_TRUE(p.spec) << p.rejection;
    return *p.spec;
  };
  const std::map<std::string, std::string> worker = {{"role", "worker"}, {"cpus", "8"}};
  const std::map<std::string, std::string> primary = {
      {"node-role.kubernetes.io/control-plane", ""}};
  EXPECT_TRUE(selectsNode(*parseHostJobSpec({{"command", {"/bin/x"}}}).spec, "n", primary));
  const HostJobSpec not_cp = spec(
      {{{"matchExpressions",
         {{{"key", "node-role.kubernetes.io/control-plane"}, {"operator", "DoesNotExist"}}}}}});
  EXPECT_TRUE(selectsNode(not_cp, "a", worker));
  EXPECT_FALSE(selectsNode(not_cp, "c", primary));
  const HostJobSpec big =
      spec({{{"matchExpressions", {{{"key", "cpus"}, {"operator", "Gt"}, {"values", {"4"}}}}}}});
  EXPECT_TRUE(selectsNode(big, "a", worker));
  EXPECT_FALSE(selectsNode(big, "c", primary));
  // Terms are ORed, requirements ANDed; an empty term matches nothing.
  const HostJobSpec either =
      spec({{{"matchFields", {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"c"}}}}}},
            {{"matchExpressions",
              {{{"key", "role"}, {"operator", "In"}, {"values", {"worker"}}},
               {{"key", "cpus"}, {"operator", "Lt"}, {"values", {"4"}}}}}}});
  EXPECT_TRUE(selectsNode(either, "c", {}));
  EXPECT_FALSE(selectsNode(either, "a", worker));  // cpus 8 is not < 4
  EXPECT_FALSE(selectsNode(spec({json::object()}), "a", worker));
  const HostJobSpec not_in = spec(
      {{{"matchExpressions", {{{"key", "role"}, {"operator", "NotIn"}, {"values", {"worker"}}}}}}});
  EXPECT_FALSE(selectsNode(not_in, "a", worker));
  EXPECT_TRUE(selectsNode(not_in, "c", primary));  // no label: NotIn holds
}

TEST(HostJobSpec, OutputTailKeepsTheLastBytesFromALineStart) {
  EXPECT_EQ(outputTail("short\n"), "short\n");
  std::string long_text;
  for (int i = 0; i < 1000; ++i) long_text += "line " + std::to_string(i) + "\n";
  const std::string tail = outputTail(long_text, 100);
  EXPECT_LE(tail.size(), 100u);
  EXPECT_EQ(tail.rfind("line 999\n"), tail.size() - 9);
  EXPECT_EQ(tail.substr(0, 5), "line ");
}

TEST(HostJobSpec, ProgressCountsFinalPhasesOfTheSelectedNodes) {
  const json nodes = {{"a", {{"phase", "Succeeded"}}},
                      {"b", {{"phase", "Failed"}}},
                      {"c", {{"phase", "Running"}}},
                      {"gone", {{"phase", "Succeeded"}}}};
  JobProgress p = jobProgress(nodes, {"a", "b", "c"});
  EXPECT_EQ(p.summary(), "2/3 nodes finished, 1 failed");
  EXPECT_FALSE(p.complete());
  p = jobProgress(nodes, {"a", "b"});
  EXPECT_TRUE(p.complete());
  EXPECT_FALSE(jobProgress(nodes, {}).complete());  // nothing selected is never complete
}

TEST(HostJobSpec, ProjectionKeepsNameUidDeletionSpecStatus) {
  auto r = projectHostJob(
      {{"metadata", {{"name", "j"}, {"uid", "u"}, {"deletionTimestamp", "2026-01-01T00:00:00Z"}}},
       {"spec", {{"command", {"/bin/x"}}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "j");
  EXPECT_EQ(r->uid, "u");
  EXPECT_TRUE(r->deleting);
  EXPECT_FALSE(projectHostJob({{"metadata", json::object()}}));
}

TEST(HostJobSpec, WronglyTypedStatusAndMetadataReadAsAbsentNeverThrow) {
  // Anyone with access to the status subresource can write an entry; every agent that finishes
  // the job reads them all.
  const json nodes = {{"a", {{"phase", 5}}},
                      {"b", "not an object"},
                      {"c", {{"phase", "Succeeded"}}},
                      {"d", {{"phase", json::array()}}}};
  JobProgress p;
  ASSERT_NO_THROW(p = jobProgress(nodes, {"a", "b", "c", "d"}));
  EXPECT_EQ(p.summary(), "1/4 nodes finished, 0 failed");
  EXPECT_NO_THROW((void)projectHostJob({{"metadata", {{"name", "j"}, {"uid", 5}}}}));
  EXPECT_FALSE(projectHostJob({{"metadata", {{"name", 5}}}}));  // no name: not a job
}

}  // namespace
}  // namespace ekco::agent
