// A task's agent type (ipc::AgentSettings, agent/agent_types.h) applied inside forkbox-child,
// once the start frame is in and the agent sandbox is entered (a standby child sandboxed itself
// before it knew the agent type; everything here only narrows that sandbox further).
#pragma once

#include <string>
#include <vector>

#include "agent/loop.h"
#include "agent/message.h"
#include "base/status.h"
#include "ipc/messages.h"
#include "sandbox/sandbox.h"

namespace forkbox::child {

// The base tool definitions named in agent.tools (in BaseToolDefs order). A name that is not a
// base tool is an error: the parent only sends names it knows. These are the loop's whole tool
// list, so a call to any other tool is refused by the loop (agent::CheckToolCall) before it runs.
Result<std::vector<agent::ToolDef>> AgentToolDefs(const ipc::AgentSettings& agent);

// `base` plus the agent's prompt, and for write "none" a sentence saying every file is read-only.
std::string AgentSystemPrompt(const std::string& base, const ipc::AgentSettings& agent);

// network "off": tool commands get no network whatever sandbox.allow_net says (the handle's
// allow_net cleared: seccomp refuses socket(), Landlock refuses TCP). write "none": makes the
// tools' temp dir `*tmp` on this process's /dev/shm (sandbox::ShortLink::kShmDir: nothing on
// disk) and gives it to `tools`, then stacks a Landlock domain with no write right anywhere else
// (only /dev/null, /dev/zero, /dev/full and that /dev/shm stay writable: sandbox::
// RestrictToReadOnly) on this process, so the agent and every tool it starts can write no file
// on disk, the workdir included. Fails when Landlock cannot be applied. With the policy disabled
// nothing is enforced (the temp dir is still made).
Status NarrowSandbox(const ipc::AgentSettings& agent, sandbox::Sandbox* tools,
                     sandbox::TaskTmpDir* tmp);

}  // namespace forkbox::child
