// The typed messages of the parent<->child protocol. Each message is one frame (ipc/frame.h)
// whose JSON object has a "type" field: "prepare", "start", "event", "result" or "error".
//
// Validation is strict: unknown types, missing or mistyped fields, unknown provider names and
// out-of-range numbers are rejected with an error naming the field. Unknown extra fields are
// ignored so that a newer parent can talk to an older child.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/secret.h"
#include "base/status.h"
#include "sandbox/settings.h"

namespace forkbox::ipc {

// How to reach the model: the one provider settings type. The parent resolves it once (flags,
// environment, defaults, validation: agent/provider_settings.h), sends it in the start frame, and
// both binaries' providers take it as it is (agent::ProviderConfig names the same type). The API
// key travels only inside the start frame.
struct ProviderSettings {
  std::string name;      // "anthropic" or "openai".
  SecretString api_key;  // May be empty for local OpenAI-compatible servers.
  std::string base_url;  // Anthropic: without /v1. OpenAI: including /v1.
  std::string model;
  int64_t max_tokens = 8192;
  int64_t max_retries = 2;
  int64_t connect_timeout_ms = 10'000;
  int64_t idle_timeout_ms = 120'000;   // No byte for this long stops a stream.
  int64_t total_timeout_ms = 600'000;  // One request, all retries excluded.
  bool stream = true;
  bool verbose = false;        // Log requests (key redacted) to stderr.
  bool prompt_caching = true;  // Anthropic cache_control on the system prompt and tools.
  // Optional in frames (absent: 0). The model's context window in tokens; 0: the built-in table
  // (agent/context.h). Anthropic extended thinking budget in tokens; 0: off.
  int64_t context_window = 0;
  int64_t thinking_budget_tokens = 0;
  bool operator==(const ProviderSettings&) const = default;
};

// A child task's limits (not the sandbox's rlimits, which are in SandboxSettings).
struct TaskLimits {
  int64_t max_turns = 30;
  int64_t tool_timeout_ms = 120'000;
  int64_t max_tool_output_chars = 50'000;
  int64_t max_summary_bytes = 16 * 1024;
  // Input + output tokens over the task's model calls (--task-max-tokens); 0: no budget. Optional
  // in frames (absent: 0).
  int64_t max_tokens = 0;
  bool operator==(const TaskLimits&) const = default;
};

// One type from the parent's options to the child's Policy (plain data, sandbox/settings.h).
using SandboxSettings = sandbox::Settings;

// Which agent type runs the task (agent/agent_types.h), as the child enforces it. Absent from a
// start frame: the built-in `general` agent (all four tools, workdir writable, --allow-net).
struct AgentSettings {
  std::string type = "general";
  std::vector<std::string> tools = {"bash", "read_file", "write_file", "edit_file"};
  std::string prompt;               // Appended to the subagent's base system prompt.
  std::string write = "workdir";    // "workdir" | "none" (no Landlock write right anywhere).
  std::string network = "inherit";  // "inherit" (sandbox.allow_net applies) | "off".
  bool operator==(const AgentSettings&) const = default;
};

// What the parent already knows about a child's sandbox, so that the child can prepare it while
// its HTTP module loads instead of waiting for the module and probing again. Optional in start
// and prepare frames (absent: 0 / false, and the child finds both out itself, as before).
struct ChildSandboxHints {
  // The TCP port of the model URL as the parent parses it (agent::UrlPort), 1..65535 (the
  // agent's only TCP destination); 0: the child parses the URL itself.
  int64_t model_port = 0;
  // The parent probed layer 2 for the children it starts and it works: the child skips its own
  // probe (if its namespaces then fail, the task fails; it never falls back to layer 1 silently).
  bool layer2_verified = false;
  bool operator==(const ChildSandboxHints&) const = default;
};

struct StartMessage {
  std::string prompt;
  ProviderSettings provider;
  TaskLimits limits;
  std::string workdir;  // Absolute.
  SandboxSettings sandbox;
  std::optional<int> transcript_fd;  // An fd number already open in the child (append-only file).
  AgentSettings agent;
  ChildSandboxHints hints;  // Ignored after a prepare frame (the child is already sandboxed).
  bool operator==(const StartMessage&) const = default;
};

// The first frame to a standby child, sent before any task exists: everything it needs to sandbox
// itself ahead of time, and nothing secret. The start frame that follows must agree with it
// (same workdir, same sandbox settings, same model URL) and carry no transcript_fd, or the child
// refuses the task (bad_start).
struct PrepareMessage {
  std::string workdir;  // Absolute.
  SandboxSettings sandbox;
  std::string model_url;  // The effective base URL; its port is the agent's only TCP destination.
  ChildSandboxHints hints;
  bool operator==(const PrepareMessage&) const = default;
};

// Bounds on what a child reports, so that the parent's sums (tokens, kept-out bytes, the session
// budget) can never overflow: a value beyond is a protocol error. Tokens, bytes, tool calls and
// milliseconds: kMaxReportedCount (2^48, about 2.8e14); turns: kMaxReportedTurns.
inline constexpr int64_t kMaxReportedCount = int64_t{1} << 48;
inline constexpr int64_t kMaxReportedTurns = 1'000'000;
// A tool name, a stop reason, an error code: at most this many bytes, no control characters
// (they reach the progress lines and the model's tool result).
inline constexpr size_t kMaxLabelBytes = 64;
// A task's prompt, as the start frame carries it (JSON-escaped): at most this many bytes, so that
// the frame (1 MiB, ipc/frame.h) keeps room for the agent's system prompt (an agent file is at
// most 256 KiB) and the settings. 256 KiB is about 64,000 tokens, more than any delegation needs
// (material that large belongs in a file the subagent reads); a larger cap would only move the
// failure to the model's context window. The parent refuses a longer prompt before any child
// starts (TaskPromptProblem).
inline constexpr size_t kMaxTaskPromptBytes = 256 * 1024;
// An error frame's message: the child cuts it to this with a note (base/utf8.h CutUtf8WithNote);
// the parent cuts whatever exceeds that again (EnforceCut).
inline constexpr size_t kMaxErrorMessageBytes = 16 * 1024;

struct EventMessage {
  int64_t turn = 0;    // At most kMaxReportedTurns.
  std::string tool;    // Tool name, or "" for a model turn without tools; a label (kMaxLabelBytes).
  std::string detail;  // One line, at most kMaxEventDetailBytes bytes (truncated on construction).
  // The task's model usage so far, cumulative (input counts cache tokens too, as ResultStats
  // does), so a task that dies before its result frame still reports what it spent.
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  // The task's tool calls so far, cumulative, each counted once the model made it (malformed ones
  // too, as ResultStats counts them): a task that fails before its result frame still reports
  // them. Optional in frames (absent: 0).
  int64_t tool_calls = 0;
  bool operator==(const EventMessage&) const = default;
};
inline constexpr size_t kMaxEventDetailBytes = 200;

struct ResultStats {
  int64_t turns = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t tool_calls = 0;
  int64_t tool_output_bytes = 0;  // Bytes of tool output the child saw (kept out of the parent).
  int64_t elapsed_ms = 0;
  std::string stop_reason;  // "completed", "max_turns", "refusal", "max_tokens", ...: a label.
  // The shares of input_tokens read from and written to the prompt cache (optional in frames).
  int64_t cache_read_input_tokens = 0;
  int64_t cache_creation_input_tokens = 0;
  bool operator==(const ResultStats&) const = default;
};

struct ResultMessage {
  // At most limits.max_summary_bytes plus the note of the child's cut ("summary"); the parent cuts
  // a longer one (EnforceCut): it enforces the limit it sent.
  std::string summary;
  ResultStats stats;
  bool operator==(const ResultMessage&) const = default;
};

struct ErrorMessage {
  std::string code;     // "bad_start", "sandbox", "model", "internal", ...: a label.
  std::string message;  // At most kMaxErrorMessageBytes plus a cut's note (see there).
  bool operator==(const ErrorMessage&) const = default;
};

using Message =
    std::variant<StartMessage, EventMessage, ResultMessage, ErrorMessage, PrepareMessage>;

// "start", "event", "result", "error" or "prepare".
const char* MessageTypeName(const Message& message);

nlohmann::json ToJson(const Message& message);
// Strict decode of one frame's JSON object. Errors name the message type and the field, e.g.
// "start message: field \"limits.max_turns\": must be an integer >= 1". Accepts start messages
// with transcript_fd absent or null (no transcript); a present fd must be in [5, 2^20 - 1].
// Strings are not checked for UTF-8 again: the frame decoder validated the raw bytes, once.
Result<Message> FromJson(const nlohmann::json& j);

// Makes `text` one line of at most max_bytes bytes of valid UTF-8: control bytes (newlines,
// tabs, ESC) become spaces, invalid bytes become U+FFFD, and the cut never splits a multi-byte
// sequence.
std::string MakeOneLine(std::string_view text, size_t max_bytes);
// MakeOneLine for an event detail (kMaxEventDetailBytes) and a label (kMaxLabelBytes).
inline std::string MakeEventDetail(std::string_view text) {
  return MakeOneLine(text, kMaxEventDetailBytes);
}
inline std::string MakeLabel(std::string_view text) { return MakeOneLine(text, kMaxLabelBytes); }

// The receiving side of a cut the sender makes with CutUtf8WithNote(text, max_bytes, what): a
// text within max_bytes plus such a note passes unchanged, a longer one is cut at max_bytes (at
// a UTF-8 boundary) with the note.
std::string EnforceCut(std::string text, size_t max_bytes, std::string_view what);

}  // namespace forkbox::ipc
