#include "tests/bench/forkbox_launch.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace forkbox::bench {

Result<ForkboxRun> LaunchForkbox(const ForkboxArgs& args) {
  ForkboxRun run;
  run.out = UniqueFd(memfd_create("forkbox-stdout", MFD_CLOEXEC));
  if (!run.out) return Status::FromErrno(errno, "memfd_create(forkbox-stdout)");
  run.err = UniqueFd(memfd_create("forkbox-stderr", MFD_CLOEXEC));
  if (!run.err) return Status::FromErrno(errno, "memfd_create(forkbox-stderr)");
  UniqueFd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull) return Status::FromErrno(errno, "open /dev/null");

  SpawnOptions spawn;
  spawn.argv = {args.bin_dir + "/forkbox",
                "--provider",
                "anthropic",
                "--base-url",
                args.base_url,
                "--child-path",
                args.bin_dir + "/forkbox-child",
                "--workdir",
                args.workdir,
                "--quiet",
                "--json"};
  spawn.argv.insert(spawn.argv.end(), args.extra.begin(), args.extra.end());
  spawn.argv.push_back(args.prompt);
  const char* home = std::getenv("HOME");
  spawn.env = {"PATH=/usr/local/bin:/usr/bin:/bin", std::string("HOME=") + (home ? home : "/"),
               "LANG=C.UTF-8", "ANTHROPIC_API_KEY=forkbox-bench-not-a-key",
               "ANTHROPIC_BASE_URL=" + args.base_url};
  spawn.fds = {{devnull.get(), 0}, {run.out.get(), 1}, {run.err.get(), 2}};
  spawn.new_session = true;
  auto child = Spawn(spawn);
  if (!child.ok()) return child.status().WithContext("spawn forkbox");
  run.process = std::move(*child);
  return run;
}

std::string ReadCaptured(const UniqueFd& fd) {
  std::string out;
  char buf[65536];
  off_t at = 0;
  for (;;) {
    const ssize_t n = pread(fd.get(), buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
  return out;
}

Result<ScratchDir> ScratchDir::Create(const std::string& prefix) {
  std::string tmpl = "/var/tmp/" + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno(errno, "mkdtemp " + tmpl);
  ScratchDir dir;
  dir.path_ = tmpl;
  return dir;
}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  std::error_code ignored;  // Best effort in a destructor; a leftover dir is harmless.
  std::filesystem::remove_all(path_, ignored);
}

ScratchDir::ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) {
  other.path_.clear();
}

ScratchDir& ScratchDir::operator=(ScratchDir&& other) noexcept {
  if (this != &other) {
    ScratchDir gone(std::move(*this));
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

}  // namespace forkbox::bench
