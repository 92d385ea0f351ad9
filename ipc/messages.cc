#include "ipc/messages.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/utf8.h"

namespace forkbox::ipc {
namespace {

using nlohmann::json;

// Highest descriptor number the kernel can ever hand out (NR_OPEN); 0..4 are stdio and the pipes.
constexpr int64_t kMinTranscriptFd = 5;
constexpr int64_t kMaxTranscriptFd = (1 << 20) - 1;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

const char* JsonTypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "non-integer number";
    case json::value_t::binary:
      return "binary";
    case json::value_t::discarded:
      return "discarded";
  }
  return "unknown";
}

// Reads the fields of one JSON object strictly; every error names the field by its dotted path
// ("provider.api_key"). Unknown extra fields are ignored on purpose (see messages.h).
class FieldReader {
 public:
  FieldReader(const json& object, std::string prefix)
      : object_(object), prefix_(std::move(prefix)) {}

  Status String(const char* key, std::string* out, bool allow_empty = true) const {
    const json* v = nullptr;
    FORKBOX_RETURN_IF_ERROR(Get(key, json::value_t::string, "a string", &v));
    const auto& s = v->get_ref<const std::string&>();
    if (!allow_empty && s.empty()) return Bad(key, "must not be empty");
    *out = s;
    return Status::Ok();
  }

  // String for a secret: read into the wiping type straight from the JSON, no other copy made.
  Status Secret(const char* key, SecretString* out) const {
    const json* v = nullptr;
    FORKBOX_RETURN_IF_ERROR(Get(key, json::value_t::string, "a string", &v));
    *out = v->get_ref<const std::string&>();
    return Status::Ok();
  }

  Status Int(const char* key, int64_t min, int64_t max, int64_t* out) const {
    auto it = object_.find(key);
    if (it == object_.end()) return Missing(key);
    if (it->is_number_unsigned()) {
      // Above INT64_MAX does not fit; anything that fits is checked against the range below.
      if (it->get<uint64_t>() > static_cast<uint64_t>(kInt64Max)) return Range(key, min, max);
    } else if (!it->is_number_integer()) {
      return WrongType(key, "an integer", *it);
    }
    int64_t value = it->get<int64_t>();
    if (value < min || value > max) return Range(key, min, max);
    *out = value;
    return Status::Ok();
  }

  // Int for a field newer frames carry: absent leaves *out as it is.
  Status OptionalInt(const char* key, int64_t min, int64_t max, int64_t* out) const {
    return Has(key) ? Int(key, min, max, out) : Status::Ok();
  }

  Status Bool(const char* key, bool* out) const {
    const json* v = nullptr;
    FORKBOX_RETURN_IF_ERROR(Get(key, json::value_t::boolean, "a boolean", &v));
    *out = v->get<bool>();
    return Status::Ok();
  }

  Status StringList(const char* key, std::vector<std::string>* out) const {
    const json* v = nullptr;
    FORKBOX_RETURN_IF_ERROR(Get(key, json::value_t::array, "an array of strings", &v));
    out->clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const json& item = (*v)[i];
      std::string path = Path(key) + "[" + std::to_string(i) + "]";
      if (!item.is_string()) {
        return Status::InvalidArgument("field \"" + path + "\": expected a string, got " +
                                       JsonTypeName(item));
      }
      out->push_back(item.get<std::string>());
    }
    return Status::Ok();
  }

  Status Object(const char* key, const json** out) const {
    return Get(key, json::value_t::object, "an object", out);
  }

  bool Has(const char* key) const { return object_.contains(key); }
  bool IsNull(const char* key) const {
    auto it = object_.find(key);
    return it != object_.end() && it->is_null();
  }
  std::string Path(const char* key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  Status Bad(const char* key, std::string_view why) const {
    return Status::InvalidArgument("field \"" + Path(key) + "\": " + std::string(why));
  }

 private:
  Status Get(const char* key, json::value_t type, const char* type_name, const json** out) const {
    auto it = object_.find(key);
    if (it == object_.end()) return Missing(key);
    if (it->type() != type) return WrongType(key, type_name, *it);
    *out = &*it;
    return Status::Ok();
  }
  Status Missing(const char* key) const {
    return Status::InvalidArgument("missing field \"" + Path(key) + "\"");
  }
  Status WrongType(const char* key, const char* want, const json& got) const {
    return Bad(key, std::string("expected ") + want + ", got " + JsonTypeName(got));
  }
  Status Range(const char* key, int64_t min, int64_t max) const {
    std::string why = "must be an integer ";
    why += max == kInt64Max ? ">= " + std::to_string(min)
                            : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    return Bad(key, why);
  }

  const json& object_;
  std::string prefix_;
};

// C0 controls, DEL, and C1 controls (U+0080..U+009F, e.g. the one-byte CSI of some terminals).
bool IsControl(std::string_view text, size_t i, size_t len) {
  auto b0 = static_cast<unsigned char>(text[i]);
  if (len == 1) return b0 < 0x20 || b0 == 0x7F;
  return len == 2 && b0 == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0;
}

bool HasControl(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t len = std::max<size_t>(Utf8SequenceLength(text, i), 1);
    if (IsControl(text, i, len)) return true;
    i += len;
  }
  return false;
}

// A short one-line text the parent shows as it is (a tool name, a stop reason, an event detail).
Status CheckLine(const FieldReader& r, const char* key, std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return r.Bad(key, std::to_string(text.size()) + " bytes exceeds the limit of " +
                          std::to_string(max_bytes));
  }
  if (text.find_first_of("\r\n") != std::string_view::npos) {
    return r.Bad(key, "must be a single line");
  }
  if (HasControl(text)) return r.Bad(key, "must not contain control characters");
  return Status::Ok();
}

Status CheckPath(const FieldReader& r, const char* key, const std::string& path) {
  if (path.find('\0') != std::string::npos) return r.Bad(key, "contains a NUL byte");
  return Status::Ok();
}

Status ReadProvider(const json& j, ProviderSettings* p) {
  FieldReader r(j, "provider");
  FORKBOX_RETURN_IF_ERROR(r.String("name", &p->name));
  if (p->name != "anthropic" && p->name != "openai") {
    return r.Bad("name",
                 "unknown provider \"" + p->name + "\" (expected \"anthropic\" or \"openai\")");
  }
  FORKBOX_RETURN_IF_ERROR(r.Secret("api_key", &p->api_key));
  FORKBOX_RETURN_IF_ERROR(r.String("base_url", &p->base_url));
  FORKBOX_RETURN_IF_ERROR(r.String("model", &p->model));
  FORKBOX_RETURN_IF_ERROR(r.Int("max_tokens", 1, kInt64Max, &p->max_tokens));
  FORKBOX_RETURN_IF_ERROR(r.Int("max_retries", 0, 100, &p->max_retries));
  FORKBOX_RETURN_IF_ERROR(r.Int("connect_timeout_ms", 1, kInt64Max, &p->connect_timeout_ms));
  FORKBOX_RETURN_IF_ERROR(r.Int("idle_timeout_ms", 1, kInt64Max, &p->idle_timeout_ms));
  FORKBOX_RETURN_IF_ERROR(r.Int("total_timeout_ms", 1, kInt64Max, &p->total_timeout_ms));
  FORKBOX_RETURN_IF_ERROR(r.Bool("stream", &p->stream));
  FORKBOX_RETURN_IF_ERROR(r.Bool("verbose", &p->verbose));
  FORKBOX_RETURN_IF_ERROR(r.Bool("prompt_caching", &p->prompt_caching));
  FORKBOX_RETURN_IF_ERROR(r.OptionalInt("context_window", 0, kInt64Max, &p->context_window));
  FORKBOX_RETURN_IF_ERROR(
      r.OptionalInt("thinking_budget_tokens", 0, kInt64Max, &p->thinking_budget_tokens));
  return Status::Ok();
}

Status ReadLimits(const json& j, TaskLimits* l) {
  FieldReader r(j, "limits");
  FORKBOX_RETURN_IF_ERROR(r.Int("max_turns", 1, kInt64Max, &l->max_turns));
  FORKBOX_RETURN_IF_ERROR(r.Int("tool_timeout_ms", 1, kInt64Max, &l->tool_timeout_ms));
  FORKBOX_RETURN_IF_ERROR(r.Int("max_tool_output_chars", 1, kInt64Max, &l->max_tool_output_chars));
  FORKBOX_RETURN_IF_ERROR(r.Int("max_summary_bytes", 1, kInt64Max, &l->max_summary_bytes));
  FORKBOX_RETURN_IF_ERROR(r.OptionalInt("max_tokens", 0, kInt64Max, &l->max_tokens));
  return Status::Ok();
}

Status ReadSandbox(const json& j, SandboxSettings* s) {
  FieldReader r(j, "sandbox");
  FORKBOX_RETURN_IF_ERROR(r.Bool("enabled", &s->enabled));
  FORKBOX_RETURN_IF_ERROR(r.Bool("allow_net", &s->allow_net));
  FORKBOX_RETURN_IF_ERROR(r.StringList("writable", &s->writable));
  for (const auto& path : s->writable) FORKBOX_RETURN_IF_ERROR(CheckPath(r, "writable", path));
  FORKBOX_RETURN_IF_ERROR(r.StringList("readable", &s->readable));
  for (const auto& path : s->readable) FORKBOX_RETURN_IF_ERROR(CheckPath(r, "readable", path));
  FORKBOX_RETURN_IF_ERROR(r.StringList("unreadable", &s->unreadable));
  for (const auto& path : s->unreadable) {
    FORKBOX_RETURN_IF_ERROR(CheckPath(r, "unreadable", path));
  }
  FORKBOX_RETURN_IF_ERROR(r.StringList("env", &s->env));
  for (const auto& name : s->env) {
    if (name.empty() || name.find_first_of("=\0", 0, 2) != std::string::npos) {
      return r.Bad("env", "\"" + name + "\" is not an environment variable name");
    }
  }
  FORKBOX_RETURN_IF_ERROR(r.Int("rlimit_fsize_bytes", 1, kInt64Max, &s->rlimit_fsize_bytes));
  FORKBOX_RETURN_IF_ERROR(r.Int("rlimit_as_bytes", 1, kInt64Max, &s->rlimit_as_bytes));
  FORKBOX_RETURN_IF_ERROR(r.Int("rlimit_nofile", 1, kInt64Max, &s->rlimit_nofile));
  FORKBOX_RETURN_IF_ERROR(r.Int("rlimit_nproc", 1, kInt64Max, &s->rlimit_nproc));
  return Status::Ok();
}

Status ReadWorkdir(const FieldReader& r, std::string* workdir) {
  FORKBOX_RETURN_IF_ERROR(r.String("workdir", workdir));
  if (workdir->empty() || (*workdir)[0] != '/') {
    return r.Bad("workdir", "must be an absolute path, got \"" + *workdir + "\"");
  }
  return CheckPath(r, "workdir", *workdir);
}

Status ReadAgent(const json& j, AgentSettings* a) {
  FieldReader r(j, "agent");
  FORKBOX_RETURN_IF_ERROR(r.String("type", &a->type, /*allow_empty=*/false));
  FORKBOX_RETURN_IF_ERROR(r.StringList("tools", &a->tools));
  FORKBOX_RETURN_IF_ERROR(r.String("prompt", &a->prompt));
  FORKBOX_RETURN_IF_ERROR(r.String("write", &a->write));
  if (a->write != "workdir" && a->write != "none") {
    return r.Bad("write", "must be \"workdir\" or \"none\", got \"" + a->write + "\"");
  }
  FORKBOX_RETURN_IF_ERROR(r.String("network", &a->network));
  if (a->network != "inherit" && a->network != "off") {
    return r.Bad("network", "must be \"inherit\" or \"off\", got \"" + a->network + "\"");
  }
  return Status::Ok();
}

// The hints are top-level fields of start and prepare frames.
Status ReadHints(const FieldReader& r, ChildSandboxHints* h) {
  FORKBOX_RETURN_IF_ERROR(r.OptionalInt("model_port", 0, 65535, &h->model_port));
  if (r.Has("layer2_verified"))
    FORKBOX_RETURN_IF_ERROR(r.Bool("layer2_verified", &h->layer2_verified));
  return Status::Ok();
}

void AddHints(const ChildSandboxHints& h, json& j) {
  j["model_port"] = h.model_port;
  j["layer2_verified"] = h.layer2_verified;
}

Result<Message> ReadStart(const FieldReader& r) {
  StartMessage m;
  const json* sub = nullptr;
  FORKBOX_RETURN_IF_ERROR(r.String("prompt", &m.prompt, /*allow_empty=*/false));
  FORKBOX_RETURN_IF_ERROR(r.Object("provider", &sub));
  FORKBOX_RETURN_IF_ERROR(ReadProvider(*sub, &m.provider));
  FORKBOX_RETURN_IF_ERROR(r.Object("limits", &sub));
  FORKBOX_RETURN_IF_ERROR(ReadLimits(*sub, &m.limits));
  FORKBOX_RETURN_IF_ERROR(ReadWorkdir(r, &m.workdir));
  FORKBOX_RETURN_IF_ERROR(r.Object("sandbox", &sub));
  FORKBOX_RETURN_IF_ERROR(ReadSandbox(*sub, &m.sandbox));
  // Absent or null: no transcript.
  if (r.Has("transcript_fd") && !r.IsNull("transcript_fd")) {
    int64_t fd = 0;
    FORKBOX_RETURN_IF_ERROR(r.Int("transcript_fd", kMinTranscriptFd, kMaxTranscriptFd, &fd));
    m.transcript_fd = static_cast<int>(fd);
  }
  if (r.Has("agent")) {  // Absent: the built-in `general` agent.
    FORKBOX_RETURN_IF_ERROR(r.Object("agent", &sub));
    FORKBOX_RETURN_IF_ERROR(ReadAgent(*sub, &m.agent));
  }
  FORKBOX_RETURN_IF_ERROR(ReadHints(r, &m.hints));
  return Message(std::move(m));
}

Result<Message> ReadPrepare(const FieldReader& r) {
  PrepareMessage m;
  const json* sub = nullptr;
  FORKBOX_RETURN_IF_ERROR(ReadWorkdir(r, &m.workdir));
  FORKBOX_RETURN_IF_ERROR(r.Object("sandbox", &sub));
  FORKBOX_RETURN_IF_ERROR(ReadSandbox(*sub, &m.sandbox));
  FORKBOX_RETURN_IF_ERROR(r.String("model_url", &m.model_url, /*allow_empty=*/false));
  FORKBOX_RETURN_IF_ERROR(ReadHints(r, &m.hints));
  return Message(std::move(m));
}

Result<Message> ReadEvent(const FieldReader& r) {
  EventMessage m;
  FORKBOX_RETURN_IF_ERROR(r.Int("turn", 0, kMaxReportedTurns, &m.turn));
  FORKBOX_RETURN_IF_ERROR(r.String("tool", &m.tool));
  FORKBOX_RETURN_IF_ERROR(CheckLine(r, "tool", m.tool, kMaxLabelBytes));
  FORKBOX_RETURN_IF_ERROR(r.String("detail", &m.detail));
  FORKBOX_RETURN_IF_ERROR(CheckLine(r, "detail", m.detail, kMaxEventDetailBytes));
  FORKBOX_RETURN_IF_ERROR(r.Int("input_tokens", 0, kMaxReportedCount, &m.input_tokens));
  FORKBOX_RETURN_IF_ERROR(r.Int("output_tokens", 0, kMaxReportedCount, &m.output_tokens));
  FORKBOX_RETURN_IF_ERROR(r.OptionalInt("tool_calls", 0, kMaxReportedCount, &m.tool_calls));
  return Message(std::move(m));
}

Result<Message> ReadResult(const FieldReader& r) {
  ResultMessage m;
  const json* sub = nullptr;
  FORKBOX_RETURN_IF_ERROR(r.String("summary", &m.summary));
  FORKBOX_RETURN_IF_ERROR(r.Object("stats", &sub));
  FieldReader s(*sub, "stats");
  ResultStats& st = m.stats;
  constexpr int64_t kMax = kMaxReportedCount;
  FORKBOX_RETURN_IF_ERROR(s.Int("turns", 0, kMaxReportedTurns, &st.turns));
  FORKBOX_RETURN_IF_ERROR(s.Int("input_tokens", 0, kMax, &st.input_tokens));
  FORKBOX_RETURN_IF_ERROR(s.Int("output_tokens", 0, kMax, &st.output_tokens));
  FORKBOX_RETURN_IF_ERROR(
      s.OptionalInt("cache_read_input_tokens", 0, kMax, &st.cache_read_input_tokens));
  FORKBOX_RETURN_IF_ERROR(
      s.OptionalInt("cache_creation_input_tokens", 0, kMax, &st.cache_creation_input_tokens));
  FORKBOX_RETURN_IF_ERROR(s.Int("tool_calls", 0, kMax, &st.tool_calls));
  FORKBOX_RETURN_IF_ERROR(s.Int("tool_output_bytes", 0, kMax, &st.tool_output_bytes));
  FORKBOX_RETURN_IF_ERROR(s.Int("elapsed_ms", 0, kMax, &st.elapsed_ms));
  FORKBOX_RETURN_IF_ERROR(s.String("stop_reason", &st.stop_reason, /*allow_empty=*/false));
  FORKBOX_RETURN_IF_ERROR(CheckLine(s, "stop_reason", st.stop_reason, kMaxLabelBytes));
  return Message(std::move(m));
}

Result<Message> ReadError(const FieldReader& r) {
  ErrorMessage m;
  FORKBOX_RETURN_IF_ERROR(r.String("code", &m.code, /*allow_empty=*/false));
  FORKBOX_RETURN_IF_ERROR(CheckLine(r, "code", m.code, kMaxLabelBytes));
  FORKBOX_RETURN_IF_ERROR(r.String("message", &m.message));
  return Message(std::move(m));
}

json SandboxJson(const SandboxSettings& s) {
  return {{"enabled", s.enabled},
          {"allow_net", s.allow_net},
          {"writable", s.writable},
          {"readable", s.readable},
          {"unreadable", s.unreadable},
          {"env", s.env},
          {"rlimit_fsize_bytes", s.rlimit_fsize_bytes},
          {"rlimit_as_bytes", s.rlimit_as_bytes},
          {"rlimit_nofile", s.rlimit_nofile},
          {"rlimit_nproc", s.rlimit_nproc}};
}

json ToJsonImpl(const StartMessage& m) {
  const ProviderSettings& p = m.provider;
  const TaskLimits& l = m.limits;
  json j = {
      {"type", "start"},
      {"prompt", m.prompt},
      {"provider",
       {{"name", p.name},
        {"api_key", p.api_key.str()},
        {"base_url", p.base_url},
        {"model", p.model},
        {"max_tokens", p.max_tokens},
        {"max_retries", p.max_retries},
        {"connect_timeout_ms", p.connect_timeout_ms},
        {"idle_timeout_ms", p.idle_timeout_ms},
        {"total_timeout_ms", p.total_timeout_ms},
        {"stream", p.stream},
        {"verbose", p.verbose},
        {"prompt_caching", p.prompt_caching},
        {"context_window", p.context_window},
        {"thinking_budget_tokens", p.thinking_budget_tokens}}},
      {"limits",
       {{"max_turns", l.max_turns},
        {"tool_timeout_ms", l.tool_timeout_ms},
        {"max_tool_output_chars", l.max_tool_output_chars},
        {"max_summary_bytes", l.max_summary_bytes},
        {"max_tokens", l.max_tokens}}},
      {"workdir", m.workdir},
      {"sandbox", SandboxJson(m.sandbox)},
  };
  if (m.transcript_fd) j["transcript_fd"] = *m.transcript_fd;
  j["agent"] = {{"type", m.agent.type},
                {"tools", m.agent.tools},
                {"prompt", m.agent.prompt},
                {"write", m.agent.write},
                {"network", m.agent.network}};
  AddHints(m.hints, j);
  return j;
}

json ToJsonImpl(const PrepareMessage& m) {
  json j = {{"type", "prepare"},
            {"workdir", m.workdir},
            {"sandbox", SandboxJson(m.sandbox)},
            {"model_url", m.model_url}};
  AddHints(m.hints, j);
  return j;
}

json ToJsonImpl(const EventMessage& m) {
  return {{"type", "event"},
          {"turn", m.turn},
          {"tool", m.tool},
          {"detail", m.detail},
          {"input_tokens", m.input_tokens},
          {"output_tokens", m.output_tokens},
          {"tool_calls", m.tool_calls}};
}

json ToJsonImpl(const ResultMessage& m) {
  const ResultStats& s = m.stats;
  return {{"type", "result"},
          {"summary", m.summary},
          {"stats",
           {{"turns", s.turns},
            {"input_tokens", s.input_tokens},
            {"output_tokens", s.output_tokens},
            {"cache_read_input_tokens", s.cache_read_input_tokens},
            {"cache_creation_input_tokens", s.cache_creation_input_tokens},
            {"tool_calls", s.tool_calls},
            {"tool_output_bytes", s.tool_output_bytes},
            {"elapsed_ms", s.elapsed_ms},
            {"stop_reason", s.stop_reason}}}};
}

json ToJsonImpl(const ErrorMessage& m) {
  return {{"type", "error"}, {"code", m.code}, {"message", m.message}};
}

}  // namespace

const char* MessageTypeName(const Message& message) {
  static constexpr const char* kNames[] = {"start", "event", "result", "error", "prepare"};
  return kNames[message.index()];
}

nlohmann::json ToJson(const Message& message) {
  return std::visit([](const auto& m) { return ToJsonImpl(m); }, message);
}

Result<Message> FromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return Status::InvalidArgument(std::string("message must be a JSON object, got ") +
                                   JsonTypeName(j));
  }
  FieldReader r(j, "");
  std::string type;
  FORKBOX_RETURN_IF_ERROR(r.String("type", &type));
  Result<Message> result = Status::InvalidArgument("unset");
  if (type == "start") {
    result = ReadStart(r);
  } else if (type == "event") {
    result = ReadEvent(r);
  } else if (type == "result") {
    result = ReadResult(r);
  } else if (type == "error") {
    result = ReadError(r);
  } else if (type == "prepare") {
    result = ReadPrepare(r);
  } else {
    // A label's length at most: the type is the peer's text, and the error may reach the model.
    return Status::InvalidArgument("unknown message type \"" + MakeLabel(type) +
                                   "\" (expected prepare, start, event, result or error)");
  }
  if (!result.ok()) return result.status().WithContext(type + " message");
  return result;
}

std::string MakeOneLine(std::string_view text, size_t max_bytes) {
  std::string line;
  line.reserve(std::min(text.size(), max_bytes));
  size_t i = 0;
  while (i < text.size()) {
    size_t len = Utf8SequenceLength(text, i);
    std::string_view piece;
    if (len == 0) {
      piece = "\xEF\xBF\xBD";  // U+FFFD for a byte that is not valid UTF-8.
      len = 1;
    } else if (IsControl(text, i, len)) {
      piece = " ";  // Newlines, tabs and terminal controls: the detail is one plain line.
    } else {
      piece = text.substr(i, len);
    }
    if (line.size() + piece.size() > max_bytes) break;  // Never split a sequence.
    line += piece;
    i += len;
  }
  return line;
}

std::string EnforceCut(std::string text, size_t max_bytes, std::string_view what) {
  if (text.size() <= max_bytes + kMaxCutNoteBytes + what.size()) return text;
  return CutUtf8WithNote(std::move(text), max_bytes, what);
}

}  // namespace forkbox::ipc
