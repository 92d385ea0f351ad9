#include "tests/mock/scenario.h"

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace forkbox::mock {
namespace {

using nlohmann::json;

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw std::invalid_argument("scenario: " + path + ": " + what);
}

void CheckKeys(const json& obj, const std::string& path, const std::set<std::string>& allowed) {
  if (!obj.is_object()) Fail(path, "must be an object");
  for (const auto& [key, value] : obj.items()) {
    if (!allowed.count(key)) Fail(path + "." + key, "unknown key");
  }
}

std::string GetString(const json& obj, const std::string& key, const std::string& path) {
  const json& v = obj.at(key);
  if (!v.is_string()) Fail(path + "." + key, "must be a string");
  return v.get<std::string>();
}

// Header-valued fields accept a string, a number or a boolean.
std::string GetHeaderValue(const json& obj, const std::string& key, const std::string& path) {
  const json& v = obj.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return v.dump();
  Fail(path + "." + key, "must be a string, number or boolean");
}

int GetInt(const json& obj, const std::string& key, const std::string& path, int min) {
  const json& v = obj.at(key);
  if (!v.is_number_integer()) Fail(path + "." + key, "must be an integer");
  const int64_t n = v.get<int64_t>();
  if (n < min || n > 1'000'000'000) Fail(path + "." + key, "out of range");
  return static_cast<int>(n);
}

int64_t GetTokens(const json& obj, const std::string& key, const std::string& path) {
  if (!obj.contains(key)) return 0;
  const json& v = obj.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    Fail(path + "." + key, "must be a non-negative integer");
  }
  return v.get<int64_t>();
}

Matcher ParseMatcher(const json& when, const std::string& path) {
  CheckKeys(when, path,
            {"has_tool", "lacks_tool", "system_contains", "first_user_contains",
             "last_user_contains", "any_contains", "turn", "no_tools", "format"});
  Matcher m;
  auto str = [&](const char* key, std::optional<std::string>* out) {
    if (when.contains(key)) *out = GetString(when, key, path);
  };
  str("has_tool", &m.has_tool);
  str("lacks_tool", &m.lacks_tool);
  str("system_contains", &m.system_contains);
  str("first_user_contains", &m.first_user_contains);
  str("last_user_contains", &m.last_user_contains);
  str("any_contains", &m.any_contains);
  if (when.contains("turn")) m.turn = GetInt(when, "turn", path, 0);
  if (when.contains("no_tools")) {
    if (!when["no_tools"].is_boolean()) Fail(path + ".no_tools", "must be a boolean");
    m.no_tools = when["no_tools"].get<bool>();
  }
  if (when.contains("format")) {
    const std::string f = GetString(when, "format", path);
    if (f == "anthropic") {
      m.format = Format::kAnthropic;
    } else if (f == "openai") {
      m.format = Format::kOpenAi;
    } else {
      Fail(path + ".format", "must be \"anthropic\" or \"openai\"");
    }
  }
  return m;
}

const std::set<std::string> kStopReasons = {"end_turn",      "tool_use",   "max_tokens",
                                            "stop_sequence", "pause_turn", "refusal",
                                            "context_window"};

void ParseReply(const json& j, const std::string& path, Reply* reply) {
  CheckKeys(j, path,
            {"text", "tool_calls", "stop_reason", "stop_sequence", "usage", "thinking", "reasoning",
             "arguments_object", "no_usage"});
  if (j.contains("text")) reply->text = GetString(j, "text", path);
  if (j.contains("thinking")) reply->thinking = GetString(j, "thinking", path);
  if (j.contains("reasoning")) reply->reasoning = GetString(j, "reasoning", path);
  if (j.contains("arguments_object")) {
    if (!j["arguments_object"].is_boolean()) Fail(path + ".arguments_object", "must be a boolean");
    reply->arguments_object = j["arguments_object"].get<bool>();
  }
  if (j.contains("no_usage")) {
    if (!j["no_usage"].is_boolean()) Fail(path + ".no_usage", "must be a boolean");
    reply->no_usage = j["no_usage"].get<bool>();
  }
  if (j.contains("tool_calls")) {
    const json& calls = j["tool_calls"];
    if (!calls.is_array()) Fail(path + ".tool_calls", "must be an array");
    for (size_t i = 0; i < calls.size(); ++i) {
      const std::string cpath = path + ".tool_calls[" + std::to_string(i) + "]";
      CheckKeys(calls[i], cpath, {"name", "input", "id"});
      if (!calls[i].contains("name")) Fail(cpath + ".name", "is required");
      ToolCall call;
      call.name = GetString(calls[i], "name", cpath);
      if (call.name.empty()) Fail(cpath + ".name", "must not be empty");
      if (calls[i].contains("input")) {
        // A string is a model's broken arguments, sent verbatim (see docs/mock.md).
        if (!calls[i]["input"].is_object() && !calls[i]["input"].is_string()) {
          Fail(cpath + ".input", "must be an object or a string");
        }
        call.input = calls[i]["input"];
      }
      if (calls[i].contains("id")) call.id = GetString(calls[i], "id", cpath);
      reply->tool_calls.push_back(std::move(call));
    }
  }
  if (j.contains("stop_reason")) {
    reply->stop_reason = GetString(j, "stop_reason", path);
    if (!kStopReasons.count(reply->stop_reason)) {
      Fail(path + ".stop_reason", "unknown stop reason \"" + reply->stop_reason + "\"");
    }
  }
  if (j.contains("stop_sequence")) reply->stop_sequence = GetString(j, "stop_sequence", path);
  if (j.contains("usage")) {
    const json& u = j["usage"];
    const std::string upath = path + ".usage";
    CheckKeys(u, upath,
              {"input_tokens", "output_tokens", "cache_creation_input_tokens",
               "cache_read_input_tokens"});
    reply->usage.input_tokens = GetTokens(u, "input_tokens", upath);
    reply->usage.output_tokens = GetTokens(u, "output_tokens", upath);
    reply->usage.cache_creation_input_tokens = GetTokens(u, "cache_creation_input_tokens", upath);
    reply->usage.cache_read_input_tokens = GetTokens(u, "cache_read_input_tokens", upath);
  }
}

Fault ParseFault(const json& j, const std::string& path) {
  CheckKeys(j, path,
            {"kind", "status", "retry_after", "retry_after_ms", "should_retry", "error_type",
             "message", "event_delay_ms", "request_id", "content_encoding"});
  if (!j.contains("kind")) Fail(path + ".kind", "is required");
  Fault f;
  const std::string kind = GetString(j, "kind", path);
  auto parsed = FaultKindFromName(kind);
  if (!parsed) Fail(path + ".kind", "unknown fault kind \"" + kind + "\"");
  f.kind = *parsed;
  if (j.contains("status")) {
    f.status = GetInt(j, "status", path, 100);
    if (f.status > 599) Fail(path + ".status", "must be an HTTP status (100-599)");
  }
  if (j.contains("retry_after")) f.retry_after = GetHeaderValue(j, "retry_after", path);
  if (j.contains("retry_after_ms")) f.retry_after_ms = GetHeaderValue(j, "retry_after_ms", path);
  if (j.contains("should_retry")) f.should_retry = GetHeaderValue(j, "should_retry", path);
  if (j.contains("error_type")) f.error_type = GetString(j, "error_type", path);
  if (j.contains("message")) f.message = GetString(j, "message", path);
  if (j.contains("request_id")) f.request_id = GetHeaderValue(j, "request_id", path);
  if (j.contains("content_encoding")) {
    f.content_encoding = GetHeaderValue(j, "content_encoding", path);
  }
  if (j.contains("event_delay_ms")) f.event_delay_ms = GetInt(j, "event_delay_ms", path, 0);
  return f;
}

Rule ParseRule(const json& j, const std::string& path) {
  CheckKeys(j, path,
            {"when", "times", "delay_ms", "event_delay_ms", "reply", "fault", "name", "comment"});
  Rule rule;
  if (j.contains("name")) rule.name = GetString(j, "name", path);
  if (j.contains("when")) rule.when = ParseMatcher(j["when"], path + ".when");
  if (j.contains("times")) rule.times = GetInt(j, "times", path, 1);
  if (!j.contains("reply") && !j.contains("fault")) Fail(path, "needs a \"reply\" or a \"fault\"");
  if (j.contains("reply")) ParseReply(j["reply"], path + ".reply", &rule.reply);
  if (j.contains("fault")) rule.reply.fault = ParseFault(j["fault"], path + ".fault");
  if (j.contains("delay_ms")) rule.reply.delay_ms = GetInt(j, "delay_ms", path, 0);
  if (j.contains("event_delay_ms"))
    rule.reply.event_delay_ms = GetInt(j, "event_delay_ms", path, 0);
  return rule;
}

bool Contains(const std::string& haystack, const std::optional<std::string>& needle) {
  return !needle || haystack.find(*needle) != std::string::npos;
}

}  // namespace

std::optional<Fault::Kind> FaultKindFromName(const std::string& name) {
  static const std::pair<const char*, Fault::Kind> kKinds[] = {
      {"status", Fault::Kind::kStatus},
      {"html", Fault::Kind::kHtml},
      {"cut_stream", Fault::Kind::kCutStream},
      {"no_stop", Fault::Kind::kNoStop},
      {"malformed_json", Fault::Kind::kMalformedJson},
      {"drop_connection", Fault::Kind::kDropConnection},
      {"stream_error", Fault::Kind::kStreamError},
      {"slow_stream", Fault::Kind::kSlowStream},
  };
  for (const auto& [n, k] : kKinds) {
    if (name == n) return k;
  }
  return std::nullopt;
}

std::string FaultKindName(Fault::Kind kind) {
  switch (kind) {
    case Fault::Kind::kStatus:
      return "status";
    case Fault::Kind::kHtml:
      return "html";
    case Fault::Kind::kCutStream:
      return "cut_stream";
    case Fault::Kind::kNoStop:
      return "no_stop";
    case Fault::Kind::kMalformedJson:
      return "malformed_json";
    case Fault::Kind::kDropConnection:
      return "drop_connection";
    case Fault::Kind::kStreamError:
      return "stream_error";
    case Fault::Kind::kSlowStream:
      return "slow_stream";
  }
  return "unknown";
}

bool Matcher::Matches(const RequestView& view, const std::string& raw_body) const {
  if (format && *format != view.format) return false;
  if (has_tool && !view.HasTool(*has_tool)) return false;
  if (lacks_tool && view.HasTool(*lacks_tool)) return false;
  if (no_tools && *no_tools != view.tool_names.empty()) return false;
  if (turn && *turn != view.assistant_turns) return false;
  return Contains(view.system, system_contains) &&
         Contains(view.FirstUserText(), first_user_contains) &&
         Contains(view.LastUserText(), last_user_contains) && Contains(raw_body, any_contains);
}

Scenario Scenario::FromJson(const json& j) {
  CheckKeys(j, "$", {"rules", "require_key", "comment"});
  Scenario s;
  if (j.contains("require_key")) {
    if (!j["require_key"].is_boolean()) Fail("$.require_key", "must be a boolean");
    s.require_key_ = j["require_key"].get<bool>();
  }
  if (!j.contains("rules")) Fail("$.rules", "is required");
  if (!j["rules"].is_array()) Fail("$.rules", "must be an array");
  for (size_t i = 0; i < j["rules"].size(); ++i) {
    s.AddRule(ParseRule(j["rules"][i], "$.rules[" + std::to_string(i) + "]"));
  }
  return s;
}

Scenario Scenario::FromText(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (j.is_discarded()) {
    // Parse again with exceptions to report where the JSON is broken.
    try {
      j = json::parse(text, nullptr, true, true);
    } catch (const json::parse_error& e) {
      throw std::invalid_argument(std::string("scenario: not valid JSON: ") + e.what());
    }
  }
  return FromJson(j);
}

Scenario Scenario::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("scenario: cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::invalid_argument("scenario: cannot read " + path);
  try {
    return FromText(text.str());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

void Scenario::AddRule(Rule rule) {
  rules_.push_back(std::move(rule));
  used_.push_back(0);
}

std::optional<size_t> Scenario::Pick(const RequestView& view, const std::string& raw_body) {
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].times >= 0 && used_[i] >= rules_[i].times) continue;
    if (!rules_[i].when.Matches(view, raw_body)) continue;
    ++used_[i];
    return i;
  }
  return std::nullopt;
}

}  // namespace forkbox::mock
