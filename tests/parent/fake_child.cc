// Stand-ins for forkbox-child that misbehave in one way each (kFakeMode), to prove the parent
// turns every child failure into an is_error tool_result and goes on.
//   ok        valid result; its summary reports what the child was given (key, env, fds)
//   crash     one event, then SIGSEGV
//   killed    one event, then SIGKILL
//   garbage   bytes that are not a frame, then waits forever
//   oversize  a frame header announcing 2 MiB, then waits forever
//   noresult  one event, then exits 0 without a result
//   error     an error frame, exit 1
//   hang      forks a grandchild, writes both pids to <workdir>/fake-pids, one event, waits
//   standbydies  as a standby (prepare frame first): an error frame, exit 3; on demand: ok
//   exit4     one event, then exits 4 (the real child's "model error") without a frame
//   hugeerror an error frame with a 300 KB message (a model's error page), exit 4
//   hugesummary  a result whose summary is 100 KB of three-byte characters
//   linger    a valid result, then waits forever instead of exiting
//   closepipe one event, closes its report pipe, waits forever
//   dupkey    one event, then a result frame that names "summary" twice, exit 0
// Every mode accepts a prepare frame before the start frame (a standby child), exits 0 when fd 3
// closes after it, and the ok summary says whether one came (prepared=yes/no) and which sandbox
// hints the start frame carried (a standby's prepare frame must carry the same).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "ipc/frame.h"
#include "ipc/messages.h"

extern char** environ;

namespace {

using forkbox::ipc::ErrorMessage;
using forkbox::ipc::EventMessage;
using forkbox::ipc::PrepareMessage;
using forkbox::ipc::ResultMessage;
using forkbox::ipc::StartMessage;

constexpr int kOut = forkbox::ipc::kChildReportWriteFd;

void Send(const forkbox::ipc::Message& m) {
  if (!forkbox::ipc::WriteMessage(kOut, m).ok()) _exit(20);
}

[[noreturn]] void WaitForever() {
  while (true) pause();
}

bool EnvHas(const std::string& needle) {
  for (char** e = environ; *e != nullptr; ++e) {
    if (needle.size() > 0 && std::strstr(*e, needle.c_str()) != nullptr) return true;
  }
  return false;
}

// The frames the parent sent: a standby's prepare frame, then the start frame.
struct Frames {
  std::optional<PrepareMessage> prepare;
  StartMessage start;
};

// Reads the frames into `frames`; the exit code when the run ends here (a bad or missing frame,
// a standby told no task, or standbydies).
std::optional<int> ReadFrames(const std::string& mode, Frames& frames) {
  forkbox::ipc::FrameReader reader(forkbox::ipc::kChildControlReadFd);
  auto message = reader.Read();
  if (!message.ok()) return 10;
  if (auto* p = std::get_if<PrepareMessage>(&*message)) {
    frames.prepare = *p;
    if (mode == "standbydies") {
      Send(ErrorMessage{"sandbox", "fake standby failure"});
      return 3;
    }
    message = reader.Read();
    if (!message.ok()) return message.status().code() == forkbox::Status::Code::kEndOfFile ? 0 : 10;
  }
  auto* start = std::get_if<StartMessage>(&*message);
  if (start == nullptr) return 11;
  const std::optional<PrepareMessage>& prepare = frames.prepare;
  // A standby's start frame agrees with its prepare frame (the real child refuses it otherwise).
  if (prepare && (prepare->workdir != start->workdir || !(prepare->sandbox == start->sandbox) ||
                  !(prepare->hints == start->hints) || start->transcript_fd)) {
    return 14;
  }
  frames.start = std::move(*start);
  return std::nullopt;
}

// The modes that fail before the tool-call event (hang only prepares its grandchild there): their
// exit code, or nullopt to go on.
std::optional<int> MisbehaveBeforeTheEvent(const std::string& mode, const StartMessage& start) {
  if (mode == "error") {
    Send(ErrorMessage{"model", "fake model failure for the test"});
    return 1;
  }
  if (mode == "hugeerror") {
    Send(ErrorMessage{"model", "HTTP 400: " + std::string(300'000, 'E')});
    return 4;
  }
  if (mode == "garbage") {
    const char junk[] = "this is not a frame at all\n";
    if (write(kOut, junk, sizeof(junk) - 1) < 0) return 21;
    WaitForever();
  }
  if (mode == "oversize") {
    const unsigned char header[4] = {0, 0, 0x20, 0};  // 2 MiB, little-endian.
    if (write(kOut, header, 4) < 0) return 21;
    WaitForever();
  }
  if (mode == "hang") {
    pid_t grandchild = fork();
    if (grandchild < 0) return 12;
    if (grandchild == 0) WaitForever();
    std::string pids = std::to_string(getpid()) + "\n" + std::to_string(grandchild) + "\n";
    std::string path = start.workdir + "/fake-pids";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, pids.data(), pids.size()) < 0) return 13;
    close(fd);
  }
  return std::nullopt;
}

// The modes that fail after the tool-call event: their exit code, or nullopt to go on.
std::optional<int> MisbehaveAfterTheEvent(const std::string& mode) {
  if (mode == "hang") WaitForever();
  if (mode == "crash") {
    signal(SIGSEGV, SIG_DFL);  // Not the sanitizer's handler: a plain crash.
    raise(SIGSEGV);
  }
  if (mode == "killed") raise(SIGKILL);
  if (mode == "noresult") return 0;
  if (mode == "exit4") return 4;
  if (mode == "closepipe") {
    if (close(kOut) != 0) return 23;
    WaitForever();
  }
  if (mode == "dupkey") {
    ResultMessage result;
    result.summary = "the second summary";
    result.stats.stop_reason = "completed";
    std::string payload = forkbox::ipc::ToJson(result).dump();
    payload.insert(1, R"("summary":"the first summary",)");
    std::string frame;
    for (int shift = 0; shift < 32; shift += 8)
      frame.push_back(static_cast<char>(payload.size() >> shift));
    return forkbox::ipc::WriteAll(kOut, frame + payload).ok() ? 0 : 21;
  }
  return std::nullopt;
}

// ok: report what we were given, so the test can check the contract. The exit code.
int ReportOk(const std::string& mode, const Frames& frames) {
  const StartMessage& start = frames.start;
  std::string key = start.provider.api_key.str();
  if (start.transcript_fd) {
    const char line[] = "{\"fake\":\"transcript\"}\n";
    if (write(*start.transcript_fd, line, sizeof(line) - 1) < 0) return 22;
  }
  bool stdin_is_null = lseek(0, 0, SEEK_END) == 0 && read(0, nullptr, 0) == 0;
  ResultMessage result;
  result.summary = "fake summary for [" + start.prompt +
                   "] key_in_frame=" + (key.empty() ? "no" : "yes") +
                   " key_in_env=" + (EnvHas(key) ? "yes" : "no") +
                   " max_turns=" + std::to_string(start.limits.max_turns) +
                   " stdin_null=" + (stdin_is_null ? "yes" : "no") +
                   " prepared=" + (frames.prepare ? "yes" : "no") +
                   " model_port=" + std::to_string(start.hints.model_port) +
                   " layer2_verified=" + (start.hints.layer2_verified ? "yes" : "no");
  result.stats.turns = 2;
  result.stats.input_tokens = 100;
  result.stats.output_tokens = 20;
  result.stats.tool_calls = 1;
  result.stats.tool_output_bytes = 1234;
  result.stats.elapsed_ms = 5;
  result.stats.stop_reason = mode == "overflow" ? "context_window" : "completed";
  if (mode == "hugesummary") {
    result.summary.clear();
    for (int i = 0; i < 100'000 / 3; ++i) result.summary += "\xE2\x82\xAC";  // U+20AC.
  }
  Send(result);
  if (mode == "linger") WaitForever();
  return 0;
}

}  // namespace

// Defined by each mode's program (tests/parent/CMakeLists.txt).
extern const char kFakeMode[];

int main() {
  const std::string mode = kFakeMode;
  Frames frames;
  if (std::optional<int> code = ReadFrames(mode, frames)) return *code;
  if (std::optional<int> code = MisbehaveBeforeTheEvent(mode, frames.start)) return *code;
  Send(EventMessage{1, "bash", "fake tool call"});
  if (std::optional<int> code = MisbehaveAfterTheEvent(mode)) return *code;
  return ReportOk(mode, frames);
}
