// The parent's side of agent types (agent/agent_types.h): loading them for a session, resolving a
// task's `subagent_type`, and `forkbox agents`.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "agent/agent_types.h"
#include "base/status.h"

namespace forkbox::parent {

// The catalog for `workdir` and $HOME (no user directories when HOME is unset).
agent::AgentCatalog LoadAgents(const std::string& workdir);

// The agent a `task` call's input names with `subagent_type` (absent: general). An unknown name
// or a non-string is an error whose message lists the available agents (the model sees it).
Result<agent::AgentType> ResolveSubagentType(const agent::AgentCatalog& catalog,
                                             const nlohmann::json& input);

// `forkbox agents [--workdir DIR] [--allow-net] [--sandbox on|off]`: every agent with its source
// file, the definitions it overrides, tools, model and effective sandbox, then the notes and
// warnings from parsing. argv[0] is "agents". Returns the process exit code (0, or 2 on a usage
// error; bad agent files are warnings, not errors).
int AgentsCommandMain(int argc, char** argv);

}  // namespace forkbox::parent
