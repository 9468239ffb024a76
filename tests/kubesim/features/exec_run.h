// pods/exec in run mode (ExecReply::run): the exec's command runs for real on this machine, so a
// test can put a real program (the `ceph` CLI against tests/ceph's cluster) behind a pod.
#pragma once

#include <string>
#include <vector>

#include "tests/kubesim/server/server.h"

namespace ekco::kubesim {

// Runs `command` (argv as the client sent it, no shell; argv[0] looked up in PATH) with
// `entry.run_env` added to this process's environment and `entry.run_timeout`, and returns its
// stdout, stderr and exit status as a scripted reply would carry them. A program that cannot be
// started answers exit 126 (found, not runnable) or 127 (not found) with the reason on stderr,
// as a container runtime's exec does; a timeout answers 124, a signal 128+N.
ExecReply runExecCommand(const ExecReply& entry, const std::vector<std::string>& command);

}  // namespace ekco::kubesim
