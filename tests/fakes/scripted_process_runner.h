// A ProcessRunner for tests: records every request and answers from a script matched by argv.
//
//   fakes::ScriptedProcessRunner runner;
//   runner.on({"crictl", "ps", "-q"}, fakes::ScriptedProcessRunner::exited(0, "abc\n"));
//   runner.onPrefix({"systemctl", "restart"}, fakes::ScriptedProcessRunner::exited(0));
//   ... code under test ...
//   EXPECT_EQ(runner.requests()[0].argv, (std::vector<std::string>{"crictl", "ps", "-q"}));
//
// Matching: an exact rule wins over prefix rules; among prefix rules the longest prefix wins.
// Scripting the same rule again queues another answer: the answers are given in order and the
// last one repeats (script a failure, then a success, to test a retry).
// An unscripted call fails the running test (ADD_FAILURE) and returns an Error naming the argv,
// so code under test that swallows errors still cannot hide it. Thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/os/process.h"
#include "base/result.h"

namespace ekco::fakes {

class ScriptedProcessRunner final : public base::ProcessRunner {
 public:
  // Computes an answer from the request (to echo stdin, or check env, ...).
  using Responder = std::function<base::Result<base::ProcessResult>(const base::ProcessRequest&)>;

  // A result for scripts: the child exited with `code` after writing `out` and `err`.
  static base::ProcessResult exited(int code, std::string out = "", std::string err = "") {
    return base::ProcessResult{
        .exit_code = code, .stdout_data = std::move(out), .stderr_data = std::move(err)};
  }
  // A result for scripts: the child ran into the request's timeout and was killed.
  static base::ProcessResult timedOut() {
    return base::ProcessResult{.exit_code = -1, .term_signal = 9, .timed_out = true};
  }

  // Answers calls whose argv is exactly `argv`.
  ScriptedProcessRunner& on(std::vector<std::string> argv,
                            base::Result<base::ProcessResult> answer) {
    return on(std::move(argv), constant(std::move(answer)));
  }
  ScriptedProcessRunner& on(std::vector<std::string> argv, Responder responder) {
    std::lock_guard lock(mu_);
    exact_[std::move(argv)].answers.push_back(std::move(responder));
    return *this;
  }

  // Answers calls whose argv starts with `prefix` (and is at least as long).
  ScriptedProcessRunner& onPrefix(std::vector<std::string> prefix,
                                  base::Result<base::ProcessResult> answer) {
    return onPrefix(std::move(prefix), constant(std::move(answer)));
  }
  ScriptedProcessRunner& onPrefix(std::vector<std::string> prefix, Responder responder) {
    std::lock_guard lock(mu_);
    prefix_[std::move(prefix)].answers.push_back(std::move(responder));
    return *this;
  }

  base::Result<base::ProcessResult> run(const base::ProcessRequest& request) override {
    Responder responder;
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
      Rule* rule = match(request.argv);
      if (rule == nullptr) {
        unscripted_.push_back(request.argv);
      } else {
        std::size_t i = std::min(rule->next, rule->answers.size() - 1);
        if (rule->next < rule->answers.size()) ++rule->next;
        responder = rule->answers[i];
      }
    }
    if (!responder) {
      std::string argv = base::formatArgv(request.argv);
      ADD_FAILURE() << "ScriptedProcessRunner: unscripted command: " << argv;
      return base::Error("ScriptedProcessRunner: unscripted command: " + argv);
    }
    return responder(request);  // outside the lock: a responder may call run() again
  }

  // Every request so far, in call order (unscripted ones included).
  std::vector<base::ProcessRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  // Just the argv of every request, for compact assertions.
  std::vector<std::vector<std::string>> argvs() const {
    std::lock_guard lock(mu_);
    std::vector<std::vector<std::string>> out;
    out.reserve(requests_.size());
    for (const auto& r : requests_) out.push_back(r.argv);
    return out;
  }
  // The argv of calls no rule matched.
  std::vector<std::vector<std::string>> unscripted() const {
    std::lock_guard lock(mu_);
    return unscripted_;
  }

 private:
  struct Rule {
    std::vector<Responder> answers;
    std::size_t next = 0;
  };

  static Responder constant(base::Result<base::ProcessResult> answer) {
    return [answer = std::move(answer)](const base::ProcessRequest&) { return answer; };
  }

  static bool startsWith(const std::vector<std::string>& argv,
                         const std::vector<std::string>& prefix) {
    return prefix.size() <= argv.size() && std::equal(prefix.begin(), prefix.end(), argv.begin());
  }

  Rule* match(const std::vector<std::string>& argv) {
    if (auto it = exact_.find(argv); it != exact_.end()) return &it->second;
    Rule* best = nullptr;
    std::size_t best_len = 0;
    for (auto& [prefix, rule] : prefix_) {
      if (startsWith(argv, prefix) && (best == nullptr || prefix.size() > best_len)) {
        best = &rule;
        best_len = prefix.size();
      }
    }
    return best;
  }

  mutable std::mutex mu_;
  std::map<std::vector<std::string>, Rule> exact_;
  std::map<std::vector<std::string>, Rule> prefix_;
  std::vector<base::ProcessRequest> requests_;
  std::vector<std::vector<std::string>> unscripted_;
};

}  // namespace ekco::fakes
