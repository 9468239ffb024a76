// HostJobs end to end (issue 19): three real `ekco agent` processes (node-a and node-b workers,
// node-c a control plane), each with a host root of its own, against ekco-kubesim serving the
// CRD of deploy/12-crd-hostjobs.yaml (created with the real kubectl):
//   - `ekco job run --selector '!node-role.kubernetes.io/control-plane'` runs on exactly the
//     workers: the file it writes appears under their host roots only; per-node status,
//     completed, one JobCompleted; `kubectl get hostjobs` shows the columns;
//   - a command failing on one node is reported as Failed there (Warning JobFailed), the job
//     still completes;
//   - bad input (a shell string, an empty argv, a hostPath outside the host root, an unknown
//     selector operator) is Rejected with a status message on every agent, nothing runs;
//   - deleting a HostJob stops its command.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "agent/cli/cli.h"
#include "agent/features/host_jobs/host_job_spec.h"
#include "agent/features/host_jobs/job_cmd.h"
#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "base/os/process.h"
#include "base/utf8.h"
#include "tests/agent/process_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

json nodeJson(const std::string& name, bool control_plane) {
  return kubesim::readyNodeObject(name, "", control_plane);
}

json hostJob(const std::string& name, json spec) {
  return {{"apiVersion", "ekco.kurl.sh/v1alpha1"},
          {"kind", "HostJob"},
          {"metadata", {{"name", name}}},
          {"spec", std::move(spec)}};
}

class HostJobsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ekco-hostjobs-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto server = kubesim::Server::start(
        {.out_dir = (dir_ / "sim").string(),
         .objects = {kubesim::namespaceObject("kurl"), nodeJson("node-a", false),
                     nodeJson("node-b", false), nodeJson("node-c", true)}});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    auto crd =
        kubectl({"create", "-f", std::string(EKCO_SOURCE_DIR) + "/deploy/12-crd-hostjobs.yaml"});
    ASSERT_EQ(crd.exit_code, 0) << crd.stderr_data;
    std::ofstream(dir_ / "config.yaml") << "leader_election_lease_duration: 3s\n"
                                           "leader_election_renew_deadline: 2s\n"
                                           "leader_election_retry_period: 500ms\n"
                                           "enable_host_jobs: true\n";
    for (const char* n : {"node-a", "node-b", "node-c"}) startAgent(n);
    for (const char* n : {"node-a", "node-b", "node-c"}) {
      ASSERT_TRUE(testing::eventually(
          [&] {
            json s = status(n);
            return s.is_object() && s.value("ready", false) && s["host_jobs"].is_object() &&
                   cacheSynced(s, "hostjobs");
          },
          seconds(20)))
          << testing::readWholeFile((dir_ / (std::string(n) + ".log")).string());
    }
  }
  void TearDown() override {
    for (auto& [name, pid] : pids_) testing::killAndReap(pid);
    server_.reset();
    fs::remove_all(dir_);
  }

  fs::path root(const std::string& node) const { return dir_ / ("root-" + node); }
  void startAgent(const std::string& node) {
    fs::create_directories(root(node) / "etc/kubernetes");
    fs::create_directories(root(node) / "var/lib/ekco-test");
    std::ofstream(root(node) / "etc/kubernetes/kubelet.conf") << "# joined\n";
    const pid_t pid = testing::spawnLogged(
        {EKCO_BIN, "agent", "--config", (dir_ / "config.yaml").string(), "--kubeconfig",
         server_->kubeconfigPath(), "--node-name", node, "--host-root", root(node).string(),
         "--socket", (dir_ / (node + ".sock")).string()},
        (dir_ / (node + ".log")).string());
    ASSERT_GT(pid, 0);
    pids_[node] = pid;
  }
  json status(const std::string& node) {
    auto reply =
        queryHealthSocket((dir_ / (node + ".sock")).string(), "/status", milliseconds(2000));
    if (!reply || reply->status != 200) return nullptr;
    return json::parse(reply->body, nullptr, false);
  }
  static bool cacheSynced(const json& s, const std::string& name) {
    if (!s.is_object() || !s.contains("caches") || !s["caches"].is_array()) return false;
    for (const json& c : s["caches"]) {
      if (c["name"] == name) return c.value("synced", false);
    }
    return false;
  }
  base::ProcessResult kubectl(std::vector<std::string> args) {
    base::ProcessRequest request;
    request.argv = {"/usr/bin/kubectl", "--kubeconfig", server_->kubeconfigPath(), "--cache-dir",
                    (dir_ / "kubectl-cache").string()};
    request.argv.insert(request.argv.end(), args.begin(), args.end());
    request.timeout = seconds(30);
    auto result = runner_.run(request);
    EXPECT_TRUE(result) << result.error().message();
    return result ? *result : base::ProcessResult{};
  }
  std::pair<int, std::string> ekco(std::vector<std::string> args) {
    // `ekco job <run|status> --kubeconfig K <the rest>` (flags before a `--`).
    std::vector<std::string> full = {"ekco", args.at(0), args.at(1), "--kubeconfig",
                                     server_->kubeconfigPath()};
    full.insert(full.end(), args.begin() + 2, args.end());
    args = std::move(full);
    std::ostringstream out;
    std::ostringstream err;
    const int code = runCli(args, {.environment = {},
                                   .out = &out,
                                   .err = &err,
                                   .default_config_path = "/nonexistent/config.yaml"});
    return {code, out.str() + err.str()};
  }
  json job(const std::string& name) {
    auto j = server_->get("hostjobs.ekco.kurl.sh", "", name);
    return j ? *j : json(nullptr);
  }
  json jobStatus(const std::string& name) {
    json j = job(name);
    return j.is_object() && j.contains("status") ? j["status"] : json::object();
  }
  std::map<std::string, int> eventReasons(const std::string& name) {
    auto list = server_->store().list(*server_->store().findQualified("events"), "default", {});
    std::map<std::string, int> out;
    for (const json& e : list.body["items"]) {
      if (e["involvedObject"].value("name", "") == name &&
          e["involvedObject"].value("kind", "") == "HostJob") {
        ++out[e.value("reason", "")];
      }
    }
    return out;
  }
  bool completed(const std::string& name) { return jobStatus(name).value("completed", false); }
  // status.nodes.<node>.phase, "" when absent.
  std::string phase(const std::string& name, const std::string& node) {
    const json s = jobStatus(name);
    if (!s.contains("nodes") || !s["nodes"].is_object() || !s["nodes"].contains(node)) return "";
    return s["nodes"][node].value("phase", "");
  }

  fs::path dir_;
  std::unique_ptr<kubesim::Server> server_;
  std::map<std::string, pid_t> pids_;
  base::SystemClock clock_;
  base::BoostProcessRunner runner_{clock_};
};

TEST_F(HostJobsE2eTest, ASelectedJobRunsOnExactlyTheMatchingNodesAndCompletesOnce) {
  auto [code, out] = ekco({"job", "run", "--name", "touch-workers", "--selector",
                           "!node-role.kubernetes.io/control-plane", "--host-path",
                           "/var/lib/ekco-test", "--", "/usr/bin/touch", "marker"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("hostjob touch-workers created"));
  ASSERT_TRUE(testing::eventually([&] { return completed("touch-workers"); }, seconds(20)))
      << jobStatus("touch-workers").dump(2);
  EXPECT_TRUE(fs::exists(root("node-a") / "var/lib/ekco-test/marker"));
  EXPECT_TRUE(fs::exists(root("node-b") / "var/lib/ekco-test/marker"));
  EXPECT_FALSE(fs::exists(root("node-c") / "var/lib/ekco-test/marker"));  // not selected
  const json s = jobStatus("touch-workers");
  EXPECT_EQ(s["summary"], "2/2 nodes finished, 0 failed");
  ASSERT_TRUE(s["nodes"].is_object());
  EXPECT_EQ(s["nodes"].size(), 2u);
  EXPECT_FALSE(s["nodes"].contains("node-c"));
  for (const char* n : {"node-a", "node-b"}) {
    EXPECT_EQ(s["nodes"][n]["phase"], "Succeeded") << n;
    EXPECT_EQ(s["nodes"][n]["exitCode"], 0) << n;
    EXPECT_TRUE(s["nodes"][n]["startTime"].is_string()) << n;
    EXPECT_TRUE(s["nodes"][n]["endTime"].is_string()) << n;
  }
  ASSERT_TRUE(testing::eventually(
      [&] { return eventReasons("touch-workers")["JobCompleted"] == 1; }, seconds(5)));
  EXPECT_EQ(eventReasons("touch-workers")["JobSucceeded"], 2);
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(eventReasons("touch-workers")["JobCompleted"], 1);  // exactly one agent won it

  // `kubectl get hostjobs`: the printer columns.
  auto table = kubectl({"get", "hostjobs"});
  EXPECT_EQ(table.exit_code, 0) << table.stderr_data;
  EXPECT_THAT(table.stdout_data, HasSubstr("COMPLETED"));
  EXPECT_THAT(table.stdout_data, HasSubstr("PROGRESS"));
  EXPECT_THAT(table.stdout_data, HasSubstr("touch-workers"));
  EXPECT_THAT(table.stdout_data, HasSubstr("2/2 nodes finished, 0 failed"));

  // Once: a restarted agent does not run it again.
  fs::remove(root("node-a") / "var/lib/ekco-test/marker");
  testing::killAndReap(pids_["node-a"]);
  startAgent("node-a");
  ASSERT_TRUE(
      testing::eventually([&] { return cacheSynced(status("node-a"), "hostjobs"); }, seconds(20)));
  std::this_thread::sleep_for(seconds(1));
  EXPECT_FALSE(fs::exists(root("node-a") / "var/lib/ekco-test/marker"));

  auto [scode, sout] = ekco({"job", "status", "touch-workers"});
  EXPECT_EQ(scode, 0) << sout;
  EXPECT_THAT(sout, HasSubstr("completed:  true"));
  EXPECT_THAT(sout, HasSubstr("node-a"));
}

TEST_F(HostJobsE2eTest, AFailureOnOneNodeIsReportedThereAndTheJobStillCompletes) {
  std::ofstream(root("node-a") / "var/lib/ekco-test/only-here") << "x\n";
  ASSERT_TRUE(server_->put(
      hostJob("test-file", {{"command", {"/bin/sh", "-c", "echo checking; test -e only-here"}},
                            {"hostPath", "/var/lib/ekco-test"},
                            {"nodeSelectorTerms",
                             {{{"matchExpressions",
                                {{{"key", "kubernetes.io/hostname"},
                                  {"operator", "In"},
                                  {"values", {"node-a", "node-b"}}}}}}}}})));
  ASSERT_TRUE(testing::eventually([&] { return completed("test-file"); }, seconds(20)))
      << jobStatus("test-file").dump(2);
  const json s = jobStatus("test-file");
  EXPECT_EQ(s["summary"], "2/2 nodes finished, 1 failed");
  EXPECT_EQ(s["nodes"]["node-a"]["phase"], "Succeeded");
  EXPECT_EQ(s["nodes"]["node-b"]["phase"], "Failed");
  EXPECT_EQ(s["nodes"]["node-b"]["exitCode"], 1);
  EXPECT_EQ(s["nodes"]["node-b"]["message"], "exited with status 1");
  EXPECT_EQ(s["nodes"]["node-b"]["output"], "checking\n");
  ASSERT_TRUE(testing::eventually([&] { return eventReasons("test-file")["JobCompleted"] == 1; },
                                  seconds(5)));
  EXPECT_EQ(eventReasons("test-file")["JobFailed"], 1);
  auto [scode, sout] = ekco({"job", "status", "test-file"});
  EXPECT_EQ(scode, 1);
  EXPECT_THAT(sout, HasSubstr("Failed"));
  EXPECT_THAT(sout, HasSubstr("--- node-b output"));
}

TEST_F(HostJobsE2eTest, BadInputIsRejectedWithAStatusMessageAndNothingRuns) {
  struct Case {
    const char* name;
    json spec;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"shell-string", {{"command", "/usr/bin/touch bad"}}, "spec.command is a string"},
      {"empty-argv", {{"command", json::array()}}, "spec.command must be a non-empty list"},
      {"outside-root",
       {{"command", {"/usr/bin/touch", "bad"}}, {"hostPath", "/var/lib/../../tmp"}},
       "leaves the host root"},
      {"bad-operator",
       {{"command", {"/usr/bin/touch", "bad"}},
        {"hostPath", "/var/lib/ekco-test"},
        {"nodeSelectorTerms",
         {{{"matchExpressions", {{{"key", "a"}, {"operator", "Near"}, {"values", {"b"}}}}}}}}},
       "unknown operator \"Near\""},
  };
  // A symlink out of the host root is refused too (resolved, not only "..").
  fs::create_directory_symlink("/tmp", root("node-a") / "var/lib/escape");
  ASSERT_TRUE(server_->put(
      hostJob("symlink-out",
              {{"command", {"/usr/bin/touch", "bad-symlink"}},
               {"hostPath", "/var/lib/escape"},
               {"nodeSelectorTerms",
                {{{"matchFields",
                   {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"node-a"}}}}}}}}})));
  for (const Case& c : cases) ASSERT_TRUE(server_->put(hostJob(c.name, c.spec)));
  for (const Case& c : cases) {
    ASSERT_TRUE(testing::eventually(
        [&] {
          const json s = jobStatus(c.name);
          if (!s.contains("nodes") || s["nodes"].size() != 3) return false;
          for (const auto& [node, e] : s["nodes"].items()) {
            if (e.value("phase", "") != "Rejected") return false;
          }
          return true;
        },
        seconds(20)))
        << c.name << ": " << jobStatus(c.name).dump(2);
    const json s = jobStatus(c.name);
    EXPECT_THAT(s.value("message", ""), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(s["nodes"]["node-a"].value("message", ""), HasSubstr(c.message)) << c.name;
    EXPECT_FALSE(s.value("completed", false)) << c.name;
    EXPECT_TRUE(
        testing::eventually([&] { return eventReasons(c.name)["JobRejected"] >= 3; }, seconds(5)))
        << c.name;
  }
  ASSERT_TRUE(testing::eventually([&] { return phase("symlink-out", "node-a") == "Rejected"; },
                                  seconds(20)));
  EXPECT_THAT(jobStatus("symlink-out")["nodes"]["node-a"].value("message", ""),
              HasSubstr("leaves the host root"));
  EXPECT_FALSE(fs::exists("/tmp/bad-symlink"));
  for (const char* n : {"node-a", "node-b", "node-c"}) {
    EXPECT_FALSE(fs::exists(root(n) / "var/lib/ekco-test/bad")) << n;
    EXPECT_FALSE(fs::exists(root(n) / "bad")) << n;
  }
  // The CLI refuses the same before creating anything.
  auto [code, out] = ekco({"job", "run", "--name", "x", "--", "touch", "bad"});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(out, HasSubstr("spec.command[0] \"touch\" must be an absolute program path"));
  EXPECT_TRUE(job("x").is_null());
}

TEST_F(HostJobsE2eTest, DeletingAJobStopsItsCommand) {
  ASSERT_TRUE(server_->put(
      hostJob("sleeper",
              {{"command", {"/bin/sh", "-c", "echo $$ > pid; exec sleep 60"}},
               {"hostPath", "/var/lib/ekco-test"},
               {"nodeSelectorTerms",
                {{{"matchFields",
                   {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"node-b"}}}}}}}}})));
  const fs::path pid_file = root("node-b") / "var/lib/ekco-test/pid";
  ASSERT_TRUE(testing::eventually(
      [&] { return fs::exists(pid_file) && fs::file_size(pid_file) > 0; }, seconds(20)));
  EXPECT_EQ(jobStatus("sleeper")["nodes"]["node-b"]["phase"], "Running");
  const pid_t pid = std::stoi(testing::readWholeFile(pid_file.string()));
  ASSERT_EQ(::kill(pid, 0), 0);
  auto deleted = kubectl({"delete", "hostjob", "sleeper"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.stderr_data;
  const auto at = std::chrono::steady_clock::now();
  EXPECT_TRUE(testing::eventually([&] { return ::kill(pid, 0) != 0; }, seconds(15)));
  std::cerr
      << "hostjob deleted -> its command gone: "
      << std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - at).count()
      << " ms\n";
  EXPECT_TRUE(testing::eventually([&] { return status("node-b")["host_jobs"]["running"].empty(); },
                                  seconds(15)));
}

// Issue 34, item 1: text from outside that is not UTF-8 (a command's output, a host path) or is
// cut at a byte limit inside a character, and a wrongly typed status entry written by someone
// else, used to make the JSON serialisation throw on the job's thread (std::terminate: every
// selected agent aborted, the job stayed Running) or in a pass (the jobs after it never ran).
TEST_F(HostJobsE2eTest, TextThatIsNotUtf8OrAWronglyTypedStatusNeverStopsAnAgentOrAJob) {
  const auto onNodes = [](std::vector<std::string> nodes) {
    return json::array(
        {{{"matchFields",
           {{{"key", "metadata.name"}, {"operator", "In"}, {"values", std::move(nodes)}}}}}});
  };
  std::string e_acutes;  // 700 × é: 1,400 bytes, so the Event message is cut at 1,024
  for (int i = 0; i < 700; ++i) e_acutes += "\xC3\xA9";
  // Its rejection quotes a non-ASCII path cut at 80 bytes, inside an é; it threw in the pass, so
  // it never got a status and the jobs after it in the pass never ran.
  ASSERT_TRUE(server_->put(hostJob("a-path", {{"command", {"/usr/bin/touch", "x"}},
                                              {"hostPath", "/" + e_acutes.substr(0, 200)},
                                              {"nodeSelectorTerms", onNodes({"node-a"})}})));
  ASSERT_TRUE(server_->put(hostJob("b-latin1", {{"command", {"/usr/bin/printf", "caf\\351\\n"}},
                                                {"hostPath", "/var/lib/ekco-test"},
                                                {"nodeSelectorTerms", onNodes({"node-a"})}})));
  ASSERT_TRUE(server_->put(hostJob("c-long", {{"command", {"/bin/echo", e_acutes}},
                                              {"hostPath", "/var/lib/ekco-test"},
                                              {"nodeSelectorTerms", onNodes({"node-b"})}})));
  // node-d has no agent: its entry is written by "someone with status access", wrongly typed,
  // before node-c's command ends and its agent reads every entry to decide completion.
  ASSERT_TRUE(server_->put(nodeJson("node-d", false)));
  ASSERT_TRUE(
      server_->put(hostJob("d-typed", {{"command", {"/bin/sleep", "2"}},
                                       {"hostPath", "/var/lib/ekco-test"},
                                       {"nodeSelectorTerms", onNodes({"node-c", "node-d"})}})));
  auto typed = kubectl({"patch", "hostjob", "d-typed", "--subresource=status", "--type=merge", "-p",
                        R"({"status":{"nodes":{"node-d":{"phase":5}}}})"});
  ASSERT_EQ(typed.exit_code, 0) << typed.stderr_data;

  ASSERT_TRUE(
      testing::eventually([&] { return phase("a-path", "node-a") == "Rejected"; }, seconds(20)))
      << jobStatus("a-path").dump(2);
  EXPECT_THAT(jobStatus("a-path")["nodes"]["node-a"].value("message", ""),
              HasSubstr("spec.hostPath \"/\xC3\xA9"));
  ASSERT_TRUE(testing::eventually([&] { return completed("b-latin1"); }, seconds(20)))
      << jobStatus("b-latin1").dump(2);
  const json latin1 = jobStatus("b-latin1")["nodes"]["node-a"];
  EXPECT_EQ(latin1["phase"], "Succeeded");
  EXPECT_EQ(latin1["output"], "caf\xEF\xBF\xBD\n");  // the invalid byte became U+FFFD
  ASSERT_TRUE(testing::eventually([&] { return completed("c-long"); }, seconds(20)))
      << jobStatus("c-long").dump(2);
  EXPECT_EQ(jobStatus("c-long")["nodes"]["node-b"]["phase"], "Succeeded");
  ASSERT_TRUE(
      testing::eventually([&] { return phase("d-typed", "node-c") == "Succeeded"; }, seconds(20)))
      << jobStatus("d-typed").dump(2);
  ASSERT_TRUE(testing::eventually(
      [&] { return jobStatus("d-typed").value("summary", "") == "1/2 nodes finished, 0 failed"; },
      seconds(10)))
      << jobStatus("d-typed").dump(2);

  // Every Event message is valid UTF-8 and at most 1 KiB, the long one cut between characters.
  ASSERT_TRUE(testing::eventually([&] { return eventReasons("c-long")["JobSucceeded"] == 1; },
                                  seconds(10)));
  auto events = server_->store().list(*server_->store().findQualified("events"), "default", {});
  int checked = 0;
  for (const json& e : events.body["items"]) {
    const std::string message = e.value("message", "");
    EXPECT_TRUE(base::isValidUtf8(message)) << message;
    EXPECT_LE(message.size(), 1024u);
    if (e["involvedObject"].value("name", "") == "c-long" &&
        e.value("reason", "") == "JobSucceeded") {
      EXPECT_GT(message.size(), 1000u);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1);

  // No agent stopped: each is the process it was, and ready.
  for (const auto& [node, pid] : pids_) {
    EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), 0)
        << node << " exited: " << testing::readWholeFile((dir_ / (node + ".log")).string());
    EXPECT_TRUE(status(node).value("ready", false)) << node;
  }
  // `ekco job status` prints the wrongly typed entry instead of aborting.
  auto [code, out] = ekco({"job", "status", "d-typed"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("node-d"));
  EXPECT_THAT(out, HasSubstr("1/2 nodes finished, 0 failed"));
  auto [jcode, jout] = ekco({"job", "status", "d-typed", "--json"});
  EXPECT_EQ(jcode, 0) << jout;
  EXPECT_THAT(jout, HasSubstr("\"phase\": 5"));
}

TEST(HostJobSelector, LabelSelectorSyntaxBecomesMatchExpressions) {
  auto terms = selectorToTerms("a=b, c!=d,e,!f,g in (h, i),j notin (k)");
  ASSERT_TRUE(terms) << terms.error().message();
  EXPECT_EQ((*terms)[0]["matchExpressions"],
            json::parse(R"([{"key":"a","operator":"In","values":["b"]},
              {"key":"c","operator":"NotIn","values":["d"]},
              {"key":"e","operator":"Exists"},{"key":"f","operator":"DoesNotExist"},
              {"key":"g","operator":"In","values":["h","i"]},
              {"key":"j","operator":"NotIn","values":["k"]}])"));
  EXPECT_FALSE(selectorToTerms("a in b"));
  EXPECT_FALSE(selectorToTerms("a,,b"));
}

}  // namespace
}  // namespace ekco::agent
