#include "agent/loop.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>
#include <variant>

#include "agent/context.h"
#include "agent/wire.h"
#include "base/format.h"
#include "base/saturate.h"

namespace forkbox::agent {
namespace {

using nlohmann::json;

json BlockToJson(const ContentBlock& block) {
  if (const auto* t = std::get_if<TextBlock>(&block)) return {{"type", "text"}, {"text", t->text}};
  if (const auto* u = std::get_if<ToolUseBlock>(&block)) {
    return {{"type", "tool_use"}, {"id", u->id}, {"name", u->name}, {"input", u->input}};
  }
  if (const auto* r = std::get_if<ToolResultBlock>(&block)) {
    return {{"type", "tool_result"},
            {"tool_use_id", r->tool_use_id},
            {"content", r->content},
            {"is_error", r->is_error}};
  }
  return {{"type", "thinking"}, {"raw", std::get<ThinkingBlock>(block).raw}};
}

json MessageToJson(const Message& m) {
  json content = json::array();
  for (const ContentBlock& b : m.content) content.push_back(BlockToJson(b));
  return {{"role", m.role == Role::kUser ? "user" : "assistant"}, {"content", std::move(content)}};
}

json UsageToJson(const Usage& u) {
  return {{"input_tokens", u.input_tokens},
          {"output_tokens", u.output_tokens},
          {"cache_creation_input_tokens", u.cache_creation_input_tokens},
          {"cache_read_input_tokens", u.cache_read_input_tokens}};
}

// Every input token the provider counted (cached or not).
int64_t InputTokens(const Usage& u) {
  return SaturatingAdd(u.input_tokens,
                       SaturatingAdd(u.cache_read_input_tokens, u.cache_creation_input_tokens));
}

// Output tokens a wind-up summary may use (a budget keeps room for one such call).
constexpr int64_t kSummaryMaxTokens = 4096;

// Saturating: each reply's counts are bounded (UsageCount), their sum over many turns is not.
void AddUsage(Usage& sum, const Usage& u) {
  sum.input_tokens = SaturatingAdd(sum.input_tokens, u.input_tokens);
  sum.output_tokens = SaturatingAdd(sum.output_tokens, u.output_tokens);
  sum.cache_creation_input_tokens =
      SaturatingAdd(sum.cache_creation_input_tokens, u.cache_creation_input_tokens);
  sum.cache_read_input_tokens =
      SaturatingAdd(sum.cache_read_input_tokens, u.cache_read_input_tokens);
}

// Drops tool_use blocks (a max_tokens-cut reply may hold unfinished calls that must never run and
// that would leave the conversation without matching tool results).
void StripToolUses(Message& m) {
  std::erase_if(m.content,
                [](const ContentBlock& b) { return std::holds_alternative<ToolUseBlock>(b); });
}

std::string Shorten(std::string s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  s.resize(TruncateUtf8(s, max_bytes).size());
  return s + " [...]";
}

// A useful summary when the model did not write one: what happened plus its last words. No
// counts: the parent names a task's turns and tool calls once, from its result's stats.
std::string FallbackSummary(const std::vector<Message>& messages, size_t first_new,
                            const LoopOutcome& out) {
  std::string text =
      "[The model gave no final summary (stop: " + std::string(LoopStopName(out.stop)) + ").";
  if (out.error) text += " Error: " + out.error->ToString() + ".";
  std::vector<std::string> said;
  std::vector<std::string> calls;
  for (size_t i = messages.size(); i > first_new && (said.size() < 3 || calls.size() < 5); --i) {
    const Message& m = messages[i - 1];
    if (m.role != Role::kAssistant) continue;
    std::string t = TextOf(m);
    if (!t.empty() && said.size() < 3) said.push_back(Shorten(t, 2000));
    for (const ToolUseBlock& u : ToolUsesOf(m)) {
      if (calls.size() < 5) {
        calls.push_back(u.name + " " +
                        Shorten(u.input.dump(-1, ' ', false, json::error_handler_t::replace), 200));
      }
    }
  }
  if (said.empty()) {
    text += " It wrote no text.]";
  } else {
    text += " Its last messages, oldest first:]";
    for (auto it = said.rbegin(); it != said.rend(); ++it) text += "\n\n" + *it;
  }
  if (!calls.empty()) {
    text += "\n\n[Its last tool calls, newest first:]";
    for (const std::string& c : calls) text += "\n- " + c;
  }
  return text;
}

// Earlier RunLoop calls recorded everything up to their last assistant message; what follows
// it is the caller's new input.
size_t FirstUnrecorded(const std::vector<Message>& messages) {
  for (size_t i = messages.size(); i > 0; --i) {
    if (messages[i - 1].role == Role::kAssistant) return i;
  }
  return 0;
}

// The JSON type a schema's "type" names, checked for required fields only (optional ones are
// coerced by the tools, e.g. read_file's offset "10").
bool HasSchemaType(const json& value, const std::string& type) {
  if (type == "string") return value.is_string();
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  return true;
}

// Why a call's input is not a JSON object, with an excerpt; empty when it is one.
std::string ArgumentsProblem(const json& input) {
  if (input.is_object()) return "";
  constexpr size_t kExcerpt = 200;
  if (input.is_string()) {
    const std::string& raw = input.get_ref<const std::string&>();
    JsonDiscard why;
    const json parsed = ParseModelJson(raw, &why);
    if (parsed.is_discarded()) {
      return "the arguments are " + why.Describe() + ": " +
             std::string(TruncateUtf8(raw, kExcerpt)) + (raw.size() > kExcerpt ? "..." : "");
    }
  }
  const std::string dump = input.dump(-1, ' ', false, json::error_handler_t::replace);
  return "the arguments are not a JSON object: " + std::string(TruncateUtf8(dump, kExcerpt)) +
         (dump.size() > kExcerpt ? "..." : "");
}

// The first required field that is missing or mistyped, as a sentence; empty when none.
std::string RequiredFieldProblem(const json& input, const json& schema) {
  const auto required = schema.find("required");
  if (required == schema.end() || !required->is_array()) return "";
  const json properties = schema.value("properties", json::object());
  for (const json& name : *required) {
    if (!name.is_string()) continue;
    const std::string field = name.get<std::string>();
    const auto value = input.find(field);
    if (value == input.end()) return "the required field '" + field + "' is missing";
    const std::string type = properties.contains(field) && properties[field].is_object()
                                 ? properties[field].value("type", "")
                                 : "";
    if (!type.empty() && !HasSchemaType(*value, type)) {
      return "the field '" + field + "' must be of type " + type + ", got " + value->type_name();
    }
  }
  return "";
}

// The first field of `input` that a schema with "additionalProperties": false does not define,
// as a sentence; empty when none. A misnamed field ("file_path") would otherwise be dropped
// unseen, and the call run on what remains.
std::string UnknownFieldProblem(const json& input, const json& schema) {
  const auto additional = schema.find("additionalProperties");
  if (additional == schema.end() || *additional != false) return "";
  const json properties = schema.value("properties", json::object());
  for (const auto& [field, value] : input.items()) {
    if (properties.contains(field)) continue;
    std::vector<std::string> names;
    for (const auto& [name, spec] : properties.items()) names.push_back(name);
    return "the field " +
           Excerpt(json(field).dump(-1, ' ', false, json::error_handler_t::replace)) +
           " is not one of this tool's fields (" + JoinList(names) + ")";
  }
  return "";
}

class Loop {
 public:
  Loop(Provider& provider, std::vector<Message>& messages, const LoopOptions& options,
       ToolRunner& runner, const LoopObserver& observer)
      : provider_(provider),
        messages_(messages),
        options_(options),
        runner_(runner),
        observer_(observer),
        first_new_(messages.size()),
        recorded_(FirstUnrecorded(messages)),
        window_(provider.config().context_window > 0 ? provider.config().context_window
                                                     : KnownContextWindow(provider.config().model)),
        fixed_bytes_(FixedBytes(options)) {}

  LoopOutcome Run() {
    const int max_turns = std::max(options_.max_turns, 1);
    for (;;) {
      if (out_.turns >= max_turns) {
        FinalSummary(LoopStop::kMaxTurns,
                     "You have reached the limit of " + std::to_string(out_.turns) + " turns",
                     options_.max_tokens);
        break;
      }
      if (BudgetReached()) {
        WindUp();
        break;
      }
      ++out_.turns;
      MaybeCompact();
      CallResult r = CallFitting(options_.tools, options_.max_tokens);
      if (!r.ok()) {
        Fail(std::move(*r.error));
        break;
      }
      if (Handle(std::move(r.response))) break;
    }
    // An interrupted run has nothing to summarise: the user stopped it.
    if (options_.fallback_summary && out_.final_text.empty() &&
        out_.stop != LoopStop::kInterrupted) {
      out_.final_text = FallbackSummary(messages_, first_new_, out_);
    }
    if (options_.max_final_text_bytes > 0) {
      out_.final_text =
          CutUtf8WithNote(std::move(out_.final_text),
                          static_cast<size_t>(options_.max_final_text_bytes), "summary");
    }
    Record({{"type", "end"},
            {"stop", LoopStopName(out_.stop)},
            {"turns", out_.turns},
            {"tool_calls", out_.tool_calls},
            {"usage", UsageToJson(out_.usage)}});
    return std::move(out_);
  }

 private:
  void Record(json j) {
    if (observer_.on_transcript) observer_.on_transcript(j);
  }

  static int64_t FixedBytes(const LoopOptions& options) {
    int64_t bytes = static_cast<int64_t>(options.system.size());
    for (const ToolDef& t : options.tools) {
      bytes +=
          static_cast<int64_t>(t.name.size() + t.description.size() + t.input_schema.dump().size());
    }
    return bytes;
  }

  // The next request's input tokens: the provider's count of the last request plus an estimate
  // of what was added since (everything estimated before the first count or after a fold).
  int64_t PromptEstimate() const {
    int64_t tokens = EstimateTokens(fixed_bytes_);
    size_t from = 0;
    if (measured_tokens_ >= 0) {
      tokens = measured_tokens_;
      from = measured_upto_;
    }
    for (size_t i = from; i < messages_.size(); ++i) {
      tokens += EstimateTokens(MessageBytes(messages_[i]));
    }
    return tokens;
  }

  // Folds the oldest tool results when the next request would pass 80% of the window, down to
  // half of it, so that the rewritten prefix then stays stable for many turns.
  void MaybeCompact() {
    if (window_ <= 0) return;
    const int64_t estimate = PromptEstimate();
    if (estimate <= window_ * 8 / 10) return;
    Fold("near_window", (estimate - window_ / 2) * 4, estimate);
  }

  int64_t Fold(const char* reason, int64_t bytes, int64_t estimate) {
    const int64_t freed = FoldOldToolResults(messages_, bytes, options_.keep_results_of);
    if (freed > 0) measured_tokens_ = -1;  // The counted prefix changed: estimate it anew.
    Record({{"type", "compaction"},
            {"turn", out_.turns},
            {"reason", reason},
            {"estimated_tokens", estimate},
            {"context_window", window_},
            {"freed_bytes", freed}});
    return freed;
  }

  static bool TooLong(const CallResult& r) {
    return r.ok() ? r.response.stop_reason == StopReason::kContextWindow
                  : r.error->kind == ModelError::Kind::kContextOverflow;
  }

  // A "too long" answer folds every tool result but the latest and retries once.
  CallResult CallFitting(const std::vector<ToolDef>& tools, int64_t max_tokens) {
    CallResult r = Call(tools, max_tokens);
    if (!TooLong(r)) return r;
    if (Fold("too_long", std::numeric_limits<int64_t>::max(), PromptEstimate()) == 0) return r;
    return Call(tools, max_tokens);
  }

  int64_t Spent() const { return InputTokens(out_.usage) + out_.usage.output_tokens; }

  // Tokens left under the loop's own budget and the shared one; nullopt: no budget.
  std::optional<int64_t> BudgetLeft() const {
    std::optional<int64_t> left;
    if (options_.max_total_tokens > 0) left = options_.max_total_tokens - Spent();
    if (options_.shared_budget) {
      const int64_t shared = options_.shared_budget->Remaining();
      left = left ? std::min(*left, shared) : shared;
    }
    return left;
  }

  // True when the next turn plus a wind-up summary would not fit in the budget.
  bool BudgetReached() const {
    const std::optional<int64_t> left = BudgetLeft();
    if (!left) return false;
    const int64_t next = PromptEstimate();
    return (next + options_.max_tokens) + (next + SummaryMaxTokens()) > *left;
  }

  int64_t SummaryMaxTokens() const { return std::min(options_.max_tokens, kSummaryMaxTokens); }

  void WindUp() {
    if (PromptEstimate() + SummaryMaxTokens() > BudgetLeft().value_or(0)) {
      out_.stop = LoopStop::kBudget;  // Not even a summary fits: the fallback summary stands.
      return;
    }
    FinalSummary(LoopStop::kBudget, "The token budget is used up", SummaryMaxTokens());
  }

  CallResult Call(const std::vector<ToolDef>& tools, int64_t max_tokens) {
    Request request{options_.system, messages_, tools, max_tokens};
    json delta = json::array();
    for (size_t i = recorded_; i < messages_.size(); ++i)
      delta.push_back(MessageToJson(messages_[i]));
    recorded_ = messages_.size();
    json names = json::array();
    for (const ToolDef& t : tools) names.push_back(t.name);
    json rec = {{"type", "request"},
                {"turn", out_.turns},
                {"tools", std::move(names)},
                {"max_tokens", max_tokens},
                {"messages_delta", std::move(delta)}};
    if (!system_recorded_) {
      rec["system"] = options_.system;
      system_recorded_ = true;
    }
    Record(std::move(rec));
    CallResult r = provider_.Complete(request, observer_.on_text ? observer_.on_text : TextSink());
    if (r.ok()) {
      AddUsage(out_.usage, r.response.usage);
      if (options_.shared_budget) {
        options_.shared_budget->Spend(InputTokens(r.response.usage) +
                                      r.response.usage.output_tokens);
      }
      // A server that reports no usage leaves the estimate to the byte count.
      if (InputTokens(r.response.usage) > 0) {
        measured_tokens_ = InputTokens(r.response.usage);
        measured_upto_ = request.messages.size();
      }
      Record({{"type", "response"},
              {"turn", out_.turns},
              {"stop_reason", StopReasonName(r.response.stop_reason)},
              {"raw_stop_reason", r.response.raw_stop_reason},
              {"request_id", r.response.request_id},
              {"usage", UsageToJson(r.response.usage)},
              {"message", MessageToJson(r.response.message)}});
    } else {
      Record({{"type", "model_error"}, {"turn", out_.turns}, {"error", r.error->ToString()}});
    }
    return r;
  }

  void Fail(ModelError error) {
    // A prompt grown past the context window, or the user's stop, is a stop reason, not a broken
    // model call.
    switch (error.kind) {
      case ModelError::Kind::kContextOverflow:
        out_.stop = LoopStop::kContextWindow;
        break;
      case ModelError::Kind::kCancelled:
        out_.stop = LoopStop::kInterrupted;
        break;
      default:
        out_.stop = LoopStop::kModelError;
    }
    out_.error = std::move(error);
  }

  // Appends an assistant message; an empty one would make the next request invalid. A reply after
  // a paused turn (pause_turn) continues that turn: its content joins the paused message, since
  // roles must alternate (two paused replies in a row were refused with a 400).
  void Append(Message m) {
    m.role = Role::kAssistant;
    if (m.content.empty()) return;
    if (messages_.empty() || messages_.back().role != Role::kAssistant) {
      messages_.push_back(std::move(m));
      return;
    }
    std::vector<ContentBlock>& content = messages_.back().content;
    std::move(m.content.begin(), m.content.end(), std::back_inserter(content));
    // The grown message is estimated again (the measured count has only its first part).
    measured_upto_ = std::min(measured_upto_, messages_.size() - 1);
  }

  // Returns true when the loop stops.
  bool Handle(Response response) {
    if (observer_.on_response) observer_.on_response(out_.turns, response);
    Message& msg = response.message;
    std::vector<ToolUseBlock> calls = ToolUsesOf(msg);
    switch (response.stop_reason) {
      case StopReason::kPauseTurn:
        // The server paused a long turn: send the content back unchanged and let it continue.
        Append(std::move(msg));
        return false;
      case StopReason::kMaxTokens:
        StripToolUses(msg);
        return Stop(LoopStop::kMaxTokens, std::move(msg));
      case StopReason::kRefusal:
        StripToolUses(msg);
        return Stop(LoopStop::kRefusal, std::move(msg));
      case StopReason::kContextWindow:
        StripToolUses(msg);
        return Stop(LoopStop::kContextWindow, std::move(msg));
      default:
        break;
    }
    if (calls.empty()) return Stop(LoopStop::kCompleted, std::move(msg));
    Append(std::move(msg));
    RunTools(calls);
    if (const int sig = runner_.interrupt_signal(); sig != 0) {
      out_.stop = LoopStop::kInterrupted;
      out_.interrupt_signal = sig;
      return true;
    }
    if (malformed_turns_ >= kMaxMalformedTurns) {
      out_.stop = LoopStop::kMalformedToolCalls;
      return true;
    }
    return false;
  }

  bool Stop(LoopStop stop, Message msg) {
    out_.stop = stop;
    out_.final_text = TextOf(msg);
    Append(std::move(msg));
    return true;
  }

  void RunTools(const std::vector<ToolUseBlock>& calls) {
    for (const ToolUseBlock& c : calls) {
      if (observer_.on_tool_call) observer_.on_tool_call(out_.turns, c);
      Record({{"type", "tool_call"},
              {"turn", out_.turns},
              {"id", c.id},
              {"name", c.name},
              {"input", c.input}});
    }
    std::vector<ToolResultBlock> results = RunValid(calls);
    Message user{Role::kUser, {}};
    for (size_t i = 0; i < calls.size(); ++i) {
      ToolResultBlock r = std::move(results[i]);
      r.tool_use_id = calls[i].id;  // Results must answer their calls, in order.
      Record({{"type", "tool_result"},
              {"turn", out_.turns},
              {"id", r.tool_use_id},
              {"name", calls[i].name},
              {"is_error", r.is_error},
              {"content", r.content}});
      user.content.emplace_back(std::in_place_type<ToolResultBlock>, std::move(r));
    }
    out_.tool_calls += static_cast<int>(calls.size());
    if (observer_.on_tool_results) observer_.on_tool_results(out_.turns, user);
    messages_.push_back(std::move(user));
  }

  // Malformed calls are answered with their problem and never reach the runner; the others run.
  // One result per call, in call order.
  std::vector<ToolResultBlock> RunValid(const std::vector<ToolUseBlock>& calls) {
    std::vector<ToolResultBlock> results(calls.size());
    std::vector<ToolUseBlock> valid;
    std::vector<size_t> where;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (std::string problem = CheckToolCall(calls[i], options_.tools); !problem.empty()) {
        results[i] = ToolResultBlock{calls[i].id, std::move(problem), true};
      } else {
        valid.push_back(calls[i]);
        where.push_back(i);
      }
    }
    malformed_turns_ = valid.empty() ? malformed_turns_ + 1 : 0;
    if (valid.empty()) return results;
    std::vector<ToolResultBlock> ran = runner_.Run(valid, out_.turns);
    for (size_t k = 0; k < where.size(); ++k) {
      if (k < ran.size()) {
        results[where[k]] = std::move(ran[k]);
      } else {
        results[where[k]] = ToolResultBlock{
            "", "internal error: the tool runner returned no result for this call", true};
      }
    }
    return results;
  }

  // One last request without tools asking for a summary; `why` starts the ask.
  void FinalSummary(LoopStop stop, const std::string& why, int64_t max_tokens) {
    out_.stop = stop;
    if (!options_.force_final_summary) return;
    const std::string ask =
        why +
        ", so no more tools can be used. Reply now, without calling any tools, with your "
        "final summary: what you did, what you found, and what is left undone.";
    // Merged into the tool results' user message so roles keep alternating.
    if (!messages_.empty() && messages_.back().role == Role::kUser) {
      messages_.back().content.push_back(TextBlock{ask});
    } else {
      messages_.push_back(Message{Role::kUser, {TextBlock{ask}}});
    }
    ++out_.turns;
    MaybeCompact();
    CallResult r = CallFitting({}, max_tokens);
    if (!r.ok()) {
      Fail(std::move(*r.error));
      return;
    }
    if (observer_.on_response) observer_.on_response(out_.turns, r.response);
    StripToolUses(r.response.message);  // Nothing more runs.
    out_.final_text = TextOf(r.response.message);
    Append(std::move(r.response.message));
  }

  Provider& provider_;
  std::vector<Message>& messages_;
  const LoopOptions& options_;
  ToolRunner& runner_;
  const LoopObserver& observer_;
  const size_t first_new_;
  size_t recorded_;
  bool system_recorded_ = false;
  int malformed_turns_ = 0;       // Consecutive turns whose every tool call was malformed.
  const int64_t window_;          // Context window in tokens; 0: unknown.
  const int64_t fixed_bytes_;     // System prompt and tool definitions.
  int64_t measured_tokens_ = -1;  // The provider's input count of the last request; -1: none.
  size_t measured_upto_ = 0;      // Messages that count covered.
  LoopOutcome out_;
};

}  // namespace

std::string CheckToolCall(const ToolUseBlock& call, const std::vector<ToolDef>& tools) {
  const auto def = std::find_if(tools.begin(), tools.end(),
                                [&](const ToolDef& t) { return t.name == call.name; });
  if (def == tools.end()) {
    std::string names;
    for (const ToolDef& t : tools) names += (names.empty() ? "" : ", ") + t.name;
    return "unknown tool '" + call.name +
           "'; the available tools are: " + (names.empty() ? "none (answer without tools)" : names);
  }
  std::string problem = ArgumentsProblem(call.input);
  if (problem.empty()) problem = UnknownFieldProblem(call.input, def->input_schema);
  if (problem.empty()) problem = RequiredFieldProblem(call.input, def->input_schema);
  if (problem.empty()) return "";
  return "invalid call of " + call.name + ": " + problem +
         ". Nothing was run. Call it again with arguments that are one JSON object matching "
         "this schema: " +
         def->input_schema.dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* LoopStopName(LoopStop stop) {
  switch (stop) {
    case LoopStop::kCompleted:
      return "completed";
    case LoopStop::kMaxTurns:
      return "max_turns";
    case LoopStop::kRefusal:
      return "refusal";
    case LoopStop::kMaxTokens:
      return "max_tokens";
    case LoopStop::kContextWindow:
      return "context_window";
    case LoopStop::kModelError:
      return "model_error";
    case LoopStop::kInterrupted:
      return "interrupted";
    case LoopStop::kMalformedToolCalls:
      return "malformed_tool_calls";
    case LoopStop::kBudget:
      return "budget";
  }
  return "unknown";
}

LoopOutcome RunLoop(Provider& provider, std::vector<Message>& messages, const LoopOptions& options,
                    ToolRunner& runner, const LoopObserver& observer) {
  return Loop(provider, messages, options, runner, observer).Run();
}

}  // namespace forkbox::agent
