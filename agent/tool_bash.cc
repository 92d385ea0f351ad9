#include "agent/tool_bash.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "agent/cancel.h"
#include "agent/tool_output.h"
#include "base/format.h"
#include "base/process.h"
#include "base/run_clock.h"
#include "base/unique_fd.h"
#include "sandbox/sandbox.h"

namespace forkbox::agent {
namespace {

// After the command itself exits, how long a descendant that escaped the process group may keep
// the output pipe open before we stop reading; not waited for once the user stops.
constexpr auto kDrainDeadline = std::chrono::seconds(2);

ToolOutput Error(std::string message) { return ToolOutput{std::move(message), true, 0}; }

// Reads whatever the pipe holds. Returns false at EOF (all writers gone).
bool ReadAvailable(int fd, BoundedOutput& out) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.Append(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    return false;  // Any other read error ends the output.
  }
}

// The model sees "exit code N"; signals read as everywhere else (base/process.h).
std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  return DescribeWaitStatus(status);
}

// The command's process (its pid is its process group) and the read end of its output.
struct Started {
  ChildProcess child;
  UniqueFd out;
};

// Starts `bash -c command` in its own session: stdin /dev/null, stdout and stderr into one
// non-blocking pipe; under the tool sandbox unless the policy is off.
Result<Started> StartCommand(const std::string& command, const ToolContext& ctx) {
  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull) return Status::FromErrno(errno, "open /dev/null");
  Result<Pipe> pipe = MakePipe();
  if (!pipe.ok()) return pipe.status();
  // A second descriptor for stderr, so each target has its own source.
  UniqueFd err_write(::fcntl(pipe->write.get(), F_DUPFD_CLOEXEC, 3));
  if (!err_write) return Status::FromErrno(errno, "dup pipe");

  SpawnOptions opts;
  opts.argv = {"/bin/bash", "-c", command};
  opts.env = ctx.env;
  opts.cwd = ctx.workdir;
  opts.fds = {{devnull.get(), 0}, {pipe->write.get(), 1}, {err_write.get(), 2}};
  opts.new_session = true;
  if (!ctx.sandbox) return Status::Internal("no sandbox configured for tool commands");
  Result<ChildProcess> spawned = ctx.sandbox->Spawn(std::move(opts));
  // Our copies of the write end must go, or EOF never comes.
  pipe->write.reset();
  err_write.reset();
  if (!spawned.ok()) return spawned.status().WithContext("could not start the command");
  FORKBOX_RETURN_IF_ERROR(SetNonBlocking(pipe->read.get(), true));
  return Started{std::move(*spawned), std::move(pipe->read)};
}

// How a command ended, and what it printed.
struct Finished {
  int status = 0;
  bool timed_out = false;
  bool interrupted = false;
  bool drain_cut = false;  // A descendant outside the group kept the pipe open.
};

// Collects output until the command exits (or times out, or is cancelled) and the pipe drains.
// The whole process group is killed before the command is reaped, in every case. The timeout
// counts no time the session was stopped (RunClock).
Result<Finished> Collect(Started& s, const ToolContext& ctx, BoundedOutput& out) {
  const pid_t pgid = s.child.pid();
  RunClock clock;
  const RunClock::Duration deadline =
      std::chrono::milliseconds(std::max<int64_t>(ctx.timeout_ms, 1));
  Finished f;
  bool pipe_open = true;
  bool exited = false;
  RunClock::Duration drain_deadline{};
  while (!exited || pipe_open) {
    if (exited && clock.Now() >= drain_deadline) {
      f.drain_cut = pipe_open;
      break;
    }
    pollfd fds[2] = {{pipe_open ? s.out.get() : -1, POLLIN, 0}, {s.child.pidfd(), POLLIN, 0}};
    bool cancelled = false;
    int n =
        PollUnlessCancelled(fds, exited ? 1 : 2, clock.WaitMs(exited ? drain_deadline : deadline),
                            ctx.cancelled, &cancelled);
    if (n < 0 && errno != EINTR) return Status::FromErrno(errno, "poll");
    if (pipe_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      pipe_open = ReadAvailable(s.out.get(), out);
    }
    if (exited && cancelled) break;  // The user stops: no wait for an escaped descendant.
    if (exited) continue;
    const bool done = (fds[1].revents & POLLIN) != 0;  // revents stay 0 when cancelled.
    f.interrupted = cancelled;
    f.timed_out = !done && !cancelled && clock.Now() >= deadline;
    if (done || f.interrupted || f.timed_out) {
      // A command that exited is a zombie, so its pid (= pgid) cannot be reused yet: what is left
      // of its group (background jobs) is killed before reaping.
      ::kill(-pgid, SIGKILL);
      Result<int> w = s.child.Wait();
      if (!w.ok()) return w.status();
      f.status = *w;
      exited = true;
      if (f.interrupted) break;  // Stopping took 2 s more with an escaped descendant (rt63 P3).
      drain_deadline = clock.Now() + kDrainDeadline;
    }
  }
  if (pipe_open) ReadAvailable(s.out.get(), out);
  return f;
}

ToolOutput Describe(const Finished& f, BoundedOutput& out, const ToolContext& ctx) {
  ToolOutput result;
  result.raw_bytes = out.total_bytes();
  result.content = out.Finish();
  if (!result.content.empty() && result.content.back() != '\n') result.content += '\n';
  if (f.drain_cut) {
    result.content +=
        "[stopped reading: a background process that left the process group kept the output "
        "open]\n";
  }
  if (f.timed_out) {
    result.content +=
        "[timed out after " + FormatSeconds(ctx.timeout_ms) + "; process group killed]";
    result.is_error = true;
  } else if (f.interrupted) {
    result.content += "[interrupted by the user; process group killed]";
    result.is_error = true;
  } else {
    result.content += "[" + DescribeStatus(f.status) + "]";
    result.is_error = !(WIFEXITED(f.status) && WEXITSTATUS(f.status) == 0);
  }
  return result;
}

}  // namespace

ToolOutput RunBashTool(const nlohmann::json& input, const ToolContext& ctx) {
  auto it = input.find("command");
  if (it == input.end() || !it->is_string()) {
    return Error("bash: missing required string field 'command'");
  }
  const std::string command = it->get<std::string>();
  if (command.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Error("bash: 'command' is empty");
  }
  if (command.find('\0') != std::string::npos) return Error("bash: 'command' contains a NUL byte");
  Result<Started> started = StartCommand(command, ctx);
  if (!started.ok()) return Error("bash: " + started.status().message());
  BoundedOutput out(ctx.max_output_chars);
  Result<Finished> finished = Collect(*started, ctx, out);
  if (!finished.ok()) return Error("bash: " + finished.status().message());
  return Describe(*finished, out, ctx);
}

}  // namespace forkbox::agent
