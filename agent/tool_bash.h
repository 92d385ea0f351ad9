// The bash tool: `bash -c COMMAND` in the workdir under the tool sandbox.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/tools.h"

namespace forkbox::agent {

// stdin is /dev/null; stdout and stderr share one pipe (so they stay in order); the command leads
// its own process group, which is killed when the command exits or times out, so background jobs
// never outlive the call. Output is collected with a bounded buffer (head and tail kept).
ToolOutput RunBashTool(const nlohmann::json& input, const ToolContext& ctx);

}  // namespace forkbox::agent
