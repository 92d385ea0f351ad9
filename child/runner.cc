#include "child/runner.h"

#include <string>

#include "sandbox/sandbox.h"

namespace forkbox::child {
namespace {

std::string Field(const nlohmann::json& input, const char* name) {
  auto it = input.find(name);
  if (it == input.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

std::string DescribeCall(const agent::ToolUseBlock& call) {
  const nlohmann::json& in = call.input;
  if (!in.is_object()) return "(invalid input)";
  if (call.name == "bash") return Field(in, "command");
  if (call.name == "read_file") {
    std::string d = Field(in, "path");
    if (in.contains("offset") || in.contains("limit")) {
      d += " (lines " + (in.contains("offset") ? Field(in, "offset") : std::string("1")) + "+" +
           (in.contains("limit") ? Field(in, "limit") : std::string("")) + ")";
    }
    return d;
  }
  if (call.name == "write_file") {
    auto it = in.find("content");
    size_t n = it != in.end() && it->is_string() ? it->get_ref<const std::string&>().size() : 0;
    return Field(in, "path") + " (" + std::to_string(n) + " bytes)";
  }
  if (call.name == "edit_file") return Field(in, "path");
  return in.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<agent::ToolResultBlock> ChildToolRunner::Run(
    const std::vector<agent::ToolUseBlock>& calls, int turn) {
  std::vector<agent::ToolResultBlock> results;
  results.reserve(calls.size());
  for (const agent::ToolUseBlock& call : calls) {
    stopped_ = stopped_ || (on_call_ && !on_call_(turn, call));
    if (stopped_) {
      results.push_back({call.id, "not run: the task was stopped (its parent is gone)", true});
      continue;
    }
    agent::ToolOutput out = agent::RunBaseTool(call, ctx_);
    // Nothing the command started outlives it, detached daemons included (the agent is their
    // subreaper or PID-namespace init; tools run one at a time, so none of its children is owned).
    sandbox::KillOrphans({});
    tool_output_bytes_ +=
        out.raw_bytes > 0 ? out.raw_bytes : static_cast<int64_t>(out.content.size());
    results.push_back(agent::ToolResultBlock{call.id, std::move(out.content), out.is_error});
  }
  return results;
}

}  // namespace forkbox::child
