#include "tests/parent/run_forkbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <stdexcept>

#include "ipc/frame.h"

namespace forkbox::parent_test {

std::string ForkboxPath() { return std::string(FORKBOX_BIN_DIR) + "/forkbox"; }

std::string RandomToken() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  char buf[32];
  snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(dist(rd)));
  return buf;
}

LiveForkbox::LiveForkbox(const RunSpec& spec) {
  auto in = MakePipe();
  auto out = MakePipe();
  auto err = MakePipe();
  if (!in.ok() || !out.ok() || !err.ok()) throw std::runtime_error("pipe failed");
  UniqueFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  SpawnOptions opts;
  if (!spec.shell_redirects.empty()) {
    opts.argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" " + spec.shell_redirects};
  }
  if (!spec.bash_script.empty()) opts.argv = {"/bin/bash", "-c", spec.bash_script};
  opts.new_session = spec.own_process_group;
  opts.argv.push_back(ForkboxPath());
  for (const auto& a : spec.args) opts.argv.push_back(a);
  opts.env = spec.env;
  opts.cwd = spec.cwd;
  opts.steps = spec.steps;
  int stdin_fd = spec.stdin_text ? in->read.get() : null_fd.get();
  if (spec.stdin_fd >= 0) stdin_fd = spec.stdin_fd;
  const int stdout_fd = spec.stdout_fd >= 0 ? spec.stdout_fd : out->write.get();
  opts.fds = {{stdin_fd, 0}, {stdout_fd, 1}, {err->write.get(), 2}};
  auto child = Spawn(opts);
  if (!child.ok()) throw std::runtime_error("spawn forkbox: " + child.status().ToString());
  process_ = std::move(*child);
  in->read.reset();
  out->write.reset();
  err->write.reset();
  if (spec.stdin_text) {
    Status st = ipc::WriteAll(in->write.get(), *spec.stdin_text);
    (void)st;  // forkbox may legitimately not read stdin (usage errors).
  }
  in->write.reset();
  if (spec.stdout_fd < 0) out_ = std::move(out->read);
  err_ = std::move(err->read);
}

bool LiveForkbox::Pump() {
  struct pollfd fds[2];
  int n = 0;
  UniqueFd* owners[2];
  std::string* sinks[2];
  if (out_) {
    fds[n] = {out_.get(), POLLIN, 0};
    owners[n] = &out_;
    sinks[n++] = &result_.out;
  }
  if (err_) {
    fds[n] = {err_.get(), POLLIN, 0};
    owners[n] = &err_;
    sinks[n++] = &result_.err;
  }
  if (n == 0) return false;
  if (poll(fds, n, -1) < 0) {
    if (errno == EINTR) return true;
    throw std::runtime_error("poll failed");
  }
  for (int i = 0; i < n; ++i) {
    if (fds[i].revents == 0) continue;
    char buf[65536];
    ssize_t got = read(fds[i].fd, buf, sizeof(buf));
    if (got > 0) {
      sinks[i]->append(buf, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      owners[i]->reset();
    }
  }
  return true;
}

bool LiveForkbox::WaitForStderr(const std::string& needle) {
  while (result_.err.find(needle) == std::string::npos) {
    if (!Pump()) return false;
  }
  return true;
}

bool LiveForkbox::WaitForStdout(const std::string& needle) {
  while (result_.out.find(needle) == std::string::npos) {
    if (!Pump()) return false;
  }
  return true;
}

void LiveForkbox::Signal(int sig) { (void)process_.Signal(sig); }

void LiveForkbox::SignalGroup(int sig) { (void)kill(-process_.pid(), sig); }

RunResult LiveForkbox::Finish() {
  while (Pump()) {
  }
  auto status = process_.Wait();
  result_.exit_code = status.ok() ? ExitCodeFromWaitStatus(*status) : -1;
  result_.wait_status = status.ok() ? *status : -1;
  return result_;
}

RunResult RunForkbox(const RunSpec& spec) {
  LiveForkbox live(spec);
  return live.Finish();
}

}  // namespace forkbox::parent_test
