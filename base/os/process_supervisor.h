// The parent's side of a running child, for base/os/process.cc (BoostProcessRunner): feeds its
// stdin, collects its output, enforces the timeout and the leftover rule, then reaps it. Internal
// to the runner; see BoostProcessRunner in process.h for the contract.
#pragma once

#include <sys/types.h>

#include "base/clock.h"
#include "base/os/process.h"
#include "base/os/unique_fd.h"
#include "base/result.h"

namespace ekco::base {

// A started child: its pid (also its process group id), a pidfd when the kernel has one (-1
// otherwise) and the parent's ends of its stdin (invalid without stdin data), stdout and stderr,
// the last three non-blocking.
struct StartedChild {
  pid_t pid = -1;
  UniqueFd pidfd{};
  UniqueFd stdin_fd{};
  UniqueFd stdout_fd{};
  UniqueFd stderr_fd{};
};

// Supervises the child started at `start` until it is over and reaped; fills in result's output,
// exit code or signal, timed_out and output_truncated (not its duration). An error only when the
// child cannot be reaped.
[[nodiscard]] Status superviseChild(const ProcessRequest& request, const Clock& clock,
                                    MonoTime start, StartedChild child, ProcessResult& result);

}  // namespace ekco::base
