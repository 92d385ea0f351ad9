#include "parent/child_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <variant>

#include "ipc/frame.h"
#include "parent/spawner.h"

namespace forkbox::parent {

namespace {

// Without a spawner (an unconfined caller): the same fds, the workdir opened here.
Result<ChildProcess> SpawnDirectly(const TaskConfig& config, int control_read, int report_write,
                                   const UniqueFd& transcript) {
  UniqueFd null_fd(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null_fd) return Status::FromErrno(errno, "open /dev/null");
  UniqueFd workdir(::open(config.workdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!workdir) return Status::FromErrno(errno, "open " + config.workdir);
  const int err_fd = config.provider.verbose ? STDERR_FILENO : null_fd.get();
  SpawnOptions opts;
  opts.argv = {config.child_path};
  opts.env = config.child_env;
  opts.cwd = config.workdir;
  opts.new_session = true;
  opts.fds = {{null_fd.get(), 0},
              {err_fd, 1},
              {err_fd, 2},
              {control_read, ipc::kChildControlReadFd},
              {report_write, ipc::kChildReportWriteFd},
              {workdir.get(), ipc::kChildWorkdirFd}};
  if (transcript) opts.fds.push_back({transcript.get(), ipc::kChildTranscriptFd});
  return Spawn(opts);
}

}  // namespace

Result<LaunchedChild> LaunchChild(const TaskConfig& config, const UniqueFd& transcript) {
  Result<Pipe> control = MakePipe();
  if (!control.ok()) return control.status().WithContext("pipe");
  Result<Pipe> report = MakePipe();
  if (!report.ok()) return report.status().WithContext("pipe");
  Result<ChildProcess> child =
      config.spawner != nullptr
          ? config.spawner->Launch(control->read.get(), report->write.get(),
                                   transcript ? transcript.get() : -1)
          : SpawnDirectly(config, control->read.get(), report->write.get(), transcript);
  if (!child.ok()) {
    return child.status().WithContext("could not start " + config.child_path);
  }
  // Our copies of the child's ends go now, or EOF on the report pipe never comes.
  LaunchedChild launched;
  launched.process = std::move(*child);
  launched.control = std::move(control->write);
  launched.report = std::move(report->read);
  return launched;
}

ipc::PrepareMessage PrepareFor(const TaskConfig& config) {
  ipc::PrepareMessage m;
  m.workdir = config.workdir;
  m.sandbox = config.sandbox;
  m.model_url = config.provider.base_url;
  m.hints = config.child_hints;
  return m;
}

Status Standby::Refill() {
  while (!disabled_ && children_.size() < size_) {
    Result<LaunchedChild> launched = LaunchChild(config_, UniqueFd());
    Status st = launched.status();
    if (st.ok()) {
      // Never block the event loop on a child that does not read: the frame must fit the pipe
      // buffer in one non-blocking write (it is a few hundred bytes; a pipe holds 64 KiB).
      Result<std::string> frame = ipc::EncodeMessage(PrepareFor(config_));
      st = frame.status();
      if (st.ok()) st = SetNonBlocking(launched->control.get(), true);
      if (st.ok()) {
        ssize_t n = ::write(launched->control.get(), frame->data(), frame->size());
        if (n < 0) {
          st = Status::FromErrno(errno, "writing the prepare frame");
        } else if (static_cast<size_t>(n) != frame->size()) {
          st = Status::ResourceExhausted("the prepare frame does not fit in the pipe buffer");
        }
      }
    }
    if (!st.ok()) {
      disabled_ = true;
      children_.clear();
      return st.WithContext("standby child");
    }
    children_.push_back(std::move(*launched));
  }
  return Status::Ok();
}

std::vector<pid_t> Standby::waiting_pids() const {
  std::vector<pid_t> pids;
  for (const LaunchedChild& c : children_) pids.push_back(c.process.pid());
  return pids;
}

std::optional<LaunchedChild> Standby::Take(std::string* why) {
  if (children_.empty()) return std::nullopt;
  LaunchedChild child = std::move(children_.front());
  children_.pop_front();
  pollfd pfd{child.process.pidfd(), POLLIN, 0};
  if (::poll(&pfd, 1, 0) == 0) return child;
  // It exited while waiting: say why (its error frame, if it sent one), reap it, and stop
  // using standbys for this session (the others would most likely fail the same way).
  disabled_ = true;
  children_.clear();
  std::string reason = "exited before it was used";
  if (SetNonBlocking(child.report.get(), true).ok()) {
    ipc::FrameDecoder decoder;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(child.report.get(), buf, sizeof(buf))) > 0) {
      if (!decoder.Feed(std::string_view(buf, static_cast<size_t>(n))).ok()) break;
    }
    Result<std::optional<ipc::Message>> next = decoder.Next();
    if (next.ok() && next->has_value()) {
      if (auto* err = std::get_if<ipc::ErrorMessage>(&**next)) {
        reason = err->code + ": " + err->message;
      }
    }
  }
  Result<int> status = child.process.Wait();
  if (status.ok()) reason += " (" + DescribeWaitStatus(*status) + ")";
  if (why) *why = "the standby child " + reason;
  return std::nullopt;
}

}  // namespace forkbox::parent
