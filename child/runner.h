// The child's ToolRunner: the four base tools, one by one, reporting each call to the parent.
#pragma once

#include <signal.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "agent/loop.h"
#include "agent/tools.h"

namespace forkbox::child {

class ChildToolRunner : public agent::ToolRunner {
 public:
  // on_call gets (turn, call) before each tool runs (the child sends the event frame from it);
  // false means the parent is gone: that call and the rest are not run, and interrupt_signal()
  // turns SIGPIPE so the loop stops.
  ChildToolRunner(agent::ToolContext ctx,
                  std::function<bool(int, const agent::ToolUseBlock&)> on_call)
      : ctx_(std::move(ctx)), on_call_(std::move(on_call)) {}
  std::vector<agent::ToolResultBlock> Run(const std::vector<agent::ToolUseBlock>& calls,
                                          int turn) override;
  int interrupt_signal() const override { return stopped_ ? SIGPIPE : 0; }
  // The tools' environment, once the task's temp dir exists (its TMPDIR).
  void set_env(std::vector<std::string> env) { ctx_.env = std::move(env); }
  // Raw bytes of tool output seen so far (kept out of the parent's context).
  int64_t tool_output_bytes() const { return tool_output_bytes_; }

 private:
  agent::ToolContext ctx_;
  std::function<bool(int, const agent::ToolUseBlock&)> on_call_;
  int64_t tool_output_bytes_ = 0;
  bool stopped_ = false;
};

// One line describing a tool call's INPUT for the parent's progress display (never its output).
std::string DescribeCall(const agent::ToolUseBlock& call);

}  // namespace forkbox::child
