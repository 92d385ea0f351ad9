// The tool loop shared by the parent and the child: ask the model, run the tool calls it made,
// send back the results, repeat until it stops calling tools or the turn limit is hit.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/budget.h"
#include "agent/message.h"
#include "agent/provider.h"

namespace forkbox::agent {

// Runs all tool calls of one assistant turn and returns one result per call, in call order.
// The parent's runner runs `task` calls in parallel; the child's runs base tools one by one.
class ToolRunner {
 public:
  virtual ~ToolRunner() = default;
  virtual std::vector<ToolResultBlock> Run(const std::vector<ToolUseBlock>& calls, int turn) = 0;
  // Non-zero (the signal number) when the user interrupted the last Run: it then answered the
  // calls it did not finish with is_error results, and the loop stops with kInterrupted. Never
  // an exception: nothing may unwind through RunLoop.
  virtual int interrupt_signal() const { return 0; }
};

// Why a loop ended.
enum class LoopStop {
  kCompleted,           // The model answered without calling tools.
  kMaxTurns,            // The turn limit (a final no-tools summary was asked for).
  kRefusal,             // The model refused.
  kMaxTokens,           // The reply hit the output token limit.
  kContextWindow,       // The prompt outgrew the context window.
  kModelError,          // A model call failed after retries (LoopOutcome::error says why).
  kInterrupted,         // The user interrupted (a model call cancelled, or ToolRunner said so).
  kMalformedToolCalls,  // kMaxMalformedTurns consecutive turns of only malformed tool calls.
  kBudget,              // LoopOptions::max_total_tokens reached (a final summary was asked for).
};
// "completed", "max_turns", "refusal", "max_tokens", "context_window", "model_error",
// "interrupted", "malformed_tool_calls", "budget" (the names in transcripts and result frames).
const char* LoopStopName(LoopStop stop);

// Consecutive turns whose tool calls were all malformed before the loop gives up.
inline constexpr int kMaxMalformedTurns = 3;

// Why `call` cannot run, for the model: arguments that are not a JSON object (a repeated key
// included: ParseModelJson), an unknown tool, a field the schema does not define when it says
// "additionalProperties": false, a required field missing or of the wrong type. The text names
// the problem and the tool's schema (or the tools there are). Empty when the call is well-formed.
// The one gate of every tool call, the parent's and a child's alike (RunLoop calls it).
std::string CheckToolCall(const ToolUseBlock& call, const std::vector<ToolDef>& tools);

struct LoopOptions {
  std::string system;
  std::vector<ToolDef> tools;
  int max_turns = 30;
  int64_t max_tokens = 8192;
  // When the turn limit is hit: one last request without tools asking for a summary.
  bool force_final_summary = true;
  int64_t max_final_text_bytes = 0;  // 0: no cap. Cut with a marker otherwise.
  // Input + output tokens the loop's model calls may use in all; 0: no budget. The loop winds up
  // (a last no-tools summary call, stop kBudget) before a turn whose request, plus that summary,
  // would pass it by the estimate; without room even for the summary it stops without a call.
  int64_t max_total_tokens = 0;
  // Context management: the window is ProviderConfig::context_window, else KnownContextWindow of
  // the model (agent/context.h). Before a request estimated past 80% of it, the oldest tool
  // results are folded down to half of it; a "too long" answer folds all but the latest and
  // retries once, then stops with kContextWindow. Results of these tools are never folded.
  std::vector<std::string> keep_results_of;
  // A budget shared with others (the session's, agent/budget.h): every call is spent on it and
  // the wind-up above also happens when what is left of it would be passed. May be null.
  std::shared_ptr<TokenBudget> shared_budget;
  // When the loop ends without final text (malformed calls, a model error, an empty reply): a
  // made-up summary of what it did, for a caller that passes it on as its result (a task's
  // summary, read by the parent's model). Off: final_text stays empty (the parent's answer).
  bool fallback_summary = true;
};

struct LoopObserver {
  std::function<void(int turn, const ToolUseBlock& call)> on_tool_call;
  std::function<void(int turn, const Response& response)> on_response;
  // The user message of tool results about to be sent: one result per call of the turn, the
  // loop's own answers to malformed calls included.
  std::function<void(int turn, const Message& results)> on_tool_results;
  TextSink on_text;                                          // Streamed assistant text.
  std::function<void(const nlohmann::json&)> on_transcript;  // One JSONL record per step.
};

struct LoopOutcome {
  std::string final_text;
  LoopStop stop = LoopStop::kCompleted;
  int interrupt_signal = 0;  // With kInterrupted from the runner: the signal number.
  int turns = 0;
  int tool_calls = 0;
  Usage usage;                      // Summed over all calls, the interrupted turn's included.
  std::optional<ModelError> error;  // With kModelError, kContextWindow (HTTP 400), kInterrupted.
};

// `messages` is the conversation so far (the parent keeps it across prompts); the loop appends to
// it. A pause_turn reply is sent back and continued without counting a new user turn.
LoopOutcome RunLoop(Provider& provider, std::vector<Message>& messages, const LoopOptions& options,
                    ToolRunner& runner, const LoopObserver& observer);

}  // namespace forkbox::agent
