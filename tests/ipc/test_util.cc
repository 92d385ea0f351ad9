#include "tests/ipc/test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>

namespace forkbox::ipc::testing {

StartMessage SampleStart() {
  StartMessage m;
  m.prompt = "Find where the login handler validates passwords. Ünïcödé ✓ 🚀\nline two";
  m.provider.name = "openai";
  m.provider.api_key = "sk-test-\"quoted\"-key";
  m.provider.base_url = "http://127.0.0.1:8080/v1";
  m.provider.model = "gpt-test";
  m.provider.max_tokens = 1234;
  m.provider.max_retries = 5;
  m.provider.connect_timeout_ms = 111;
  m.provider.idle_timeout_ms = 222;
  m.provider.total_timeout_ms = 333;
  m.provider.stream = false;
  m.provider.verbose = true;
  m.limits.max_turns = 7;
  m.limits.tool_timeout_ms = 444;
  m.limits.max_tool_output_chars = 555;
  m.limits.max_summary_bytes = 666;
  m.workdir = "/work/project";
  m.sandbox.enabled = false;
  m.sandbox.allow_net = true;
  m.sandbox.writable = {"/tmp/a", "/var/b c"};
  m.sandbox.env = {"PATH", "HOME"};
  m.sandbox.unreadable = {"/var/log/forkbox transcripts"};
  m.sandbox.rlimit_fsize_bytes = 777;
  m.sandbox.rlimit_as_bytes = 888;
  m.sandbox.rlimit_nofile = 99;
  m.sandbox.rlimit_nproc = 11;
  m.transcript_fd = 7;
  m.hints.model_port = 8080;
  m.hints.layer2_verified = true;
  return m;
}

PrepareMessage SamplePrepare() {
  StartMessage start = SampleStart();
  PrepareMessage m;
  m.workdir = start.workdir;
  m.sandbox = start.sandbox;
  m.model_url = start.provider.base_url;
  m.hints = start.hints;
  return m;
}

EventMessage SampleEvent() { return EventMessage{3, "bash", "pytest -q tests/test_login.py"}; }

ResultMessage SampleResult() {
  ResultMessage m;
  m.summary = "The handler is in auth/login.py:42.\nIt uses bcrypt. \xE2\x9C\x93";
  m.stats = ResultStats{4, 1000, 200, 6, 12345, 987, "completed"};
  return m;
}

ErrorMessage SampleError() { return ErrorMessage{"sandbox", "landlock_restrict_self: EPERM"}; }

}  // namespace forkbox::ipc::testing
