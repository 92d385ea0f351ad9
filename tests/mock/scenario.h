// Scenario rules (docs/mock.md): for each request the first rule whose `when` matches and that
// has uses left decides the reply or the fault. Parsing is strict: an unknown key, a wrong type
// or a bad value throws std::invalid_argument naming the offending path.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/mock/reply.h"
#include "tests/mock/request_view.h"

namespace forkbox::mock {

struct Matcher {
  std::optional<std::string> has_tool;
  std::optional<std::string> lacks_tool;
  std::optional<std::string> system_contains;
  std::optional<std::string> first_user_contains;
  std::optional<std::string> last_user_contains;
  std::optional<std::string> any_contains;  // Anywhere in the raw request body.
  std::optional<int> turn;                  // Assistant messages already in the request.
  std::optional<bool> no_tools;
  std::optional<Format> format;

  // All present conditions must hold.
  bool Matches(const RequestView& view, const std::string& raw_body) const;
};

struct Rule {
  Matcher when;
  int times = -1;  // -1: unlimited.
  Reply reply;     // Carries delay_ms, event_delay_ms and the optional fault too.
  std::string name;
};

class Scenario {
 public:
  static Scenario FromJson(const nlohmann::json& json);
  // JSON text; // and /* */ comments are allowed so documented examples parse as-is.
  static Scenario FromText(const std::string& text);
  static Scenario FromFile(const std::string& path);

  // Index of the first matching rule with uses left, consuming one use; nullopt if none.
  // Not thread-safe: MockServer serialises calls.
  std::optional<size_t> Pick(const RequestView& view, const std::string& raw_body);

  const std::vector<Rule>& rules() const { return rules_; }
  void AddRule(Rule rule);
  // Top-level "require_key" (default true): demand x-api-key / Authorization: Bearer.
  bool require_key() const { return require_key_; }
  void set_require_key(bool require) { require_key_ = require; }

 private:
  std::vector<Rule> rules_;
  std::vector<int> used_;
  bool require_key_ = true;
};

}  // namespace forkbox::mock
