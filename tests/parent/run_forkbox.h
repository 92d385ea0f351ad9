// Test helper: runs the real forkbox binary with pipes on stdin/stdout/stderr, without timing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/process.h"
#include "base/unique_fd.h"

namespace forkbox::parent_test {

struct RunSpec {
  std::vector<std::string> args;          // After the binary path.
  std::vector<std::string> env;           // Complete environment ("NAME=value").
  std::optional<std::string> stdin_text;  // nullopt: /dev/null (or stdin_fd).
  int stdin_fd = -1;                      // When >= 0: this fd (e.g. a pty) becomes stdin.
  int stdout_fd = -1;                     // When >= 0: this fd becomes stdout (out stays empty).
  // When set, forkbox runs through `/bin/sh -c 'exec "$0" "$@" <redirects>'`: e.g. "<&- >&-"
  // starts it with stdin and stdout closed.
  std::string shell_redirects;
  // When set, forkbox runs through `/bin/bash -c SCRIPT FORKBOX ARGS...` ($0 is forkbox's path,
  // "$@" the args), in place of shell_redirects: e.g. a loop that runs it.
  std::string bash_script;
  // The process (forkbox, or bash) leads a session and process group of its own (setsid), which
  // LiveForkbox::SignalGroup signals, as a terminal or `timeout` does.
  bool own_process_group = false;
  std::string cwd;
  // Run in the child before the exec (async-signal-safe only: see SpawnStep), e.g. a seccomp
  // filter that hides a kernel feature from forkbox.
  std::vector<SpawnStep> steps;
};

struct RunResult {
  int exit_code = -1;    // A death by signal as 128 + the signal.
  int wait_status = -1;  // As waitpid gives it: WIFSIGNALED tells a death by signal.
  std::string out;
  std::string err;
};

class LiveForkbox {
 public:
  explicit LiveForkbox(const RunSpec& spec);
  pid_t pid() const { return process_.pid(); }
  // Readable once forkbox has exited: the stop for testing::ReadFifoUnless and WriteFifoUnless.
  int pidfd() const { return process_.pidfd(); }
  // Reads stdout/stderr until stderr contains `needle` (true) or both close (false).
  bool WaitForStderr(const std::string& needle);
  // Reads stdout/stderr until stdout contains `needle` (true) or both close (false).
  bool WaitForStdout(const std::string& needle);
  // Closes the read end of the stdout pipe: forkbox's next write to it fails with EPIPE.
  void CloseStdout() { out_.reset(); }
  // The same for stderr.
  void CloseStderr() { err_.reset(); }
  const std::string& out() const { return result_.out; }
  void Signal(int sig);
  // The signal to the whole process group (RunSpec::own_process_group).
  void SignalGroup(int sig);
  // Reads to EOF and reaps.
  RunResult Finish();

 private:
  bool Pump();  // One poll round; false when both pipes are closed.
  ChildProcess process_;
  UniqueFd out_;
  UniqueFd err_;
  RunResult result_;
};

RunResult RunForkbox(const RunSpec& spec);

std::string ForkboxPath();
std::string RandomToken();

}  // namespace forkbox::parent_test
