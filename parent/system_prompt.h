// The parent's system prompt: how to work, and WHEN to delegate with `task`.
#pragma once

#include <string>

namespace forkbox::parent {

// with_subagents false: the --no-subagents baseline (no task tool is offered).
std::string ParentSystemPrompt(const std::string& workdir, bool with_subagents);

}  // namespace forkbox::parent
