#include "child/agent_profile.h"

#include <algorithm>

#include "agent/tools.h"
#include "sandbox/landlock.h"

namespace forkbox::child {
namespace {

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A Landlock domain that handles every filesystem right and grants only read and execute on
// "/" (plus the harmless device files): stacked on the agent's domain, writes fail everywhere.
Status RestrictToReadOnly() {
  Status why;
  int abi = sandbox::landlock::QueryAbi(&why);
  if (abi < 1) return why.WithContext("write: none needs Landlock");
  sandbox::landlock::RulesetSpec spec;
  spec.abi = abi;
  spec.mode = sandbox::landlock::Mode::kTool;
  spec.allow_net = true;  // This layer is about files; the network is decided by the policy.
  Result<UniqueFd> ruleset = sandbox::landlock::BuildRuleset(spec);
  if (!ruleset.ok()) return ruleset.status().WithContext("write: none");
  if (int err = sandbox::landlock::RestrictSelfRaw(ruleset->get()); err != 0) {
    return Status::FromErrno(err, "write: none: landlock_restrict_self");
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<agent::ToolDef>> AgentToolDefs(const ipc::AgentSettings& agent) {
  std::vector<agent::ToolDef> defs;
  std::vector<std::string> known;
  for (agent::ToolDef& def : agent::BaseToolDefs()) {
    known.push_back(def.name);
    if (Contains(agent.tools, def.name)) defs.push_back(std::move(def));
  }
  for (const std::string& name : agent.tools) {
    if (!Contains(known, name)) {
      return Status::InvalidArgument("start frame: agent \"" + agent.type +
                                     "\" names an unknown tool \"" + name + "\"");
    }
  }
  return defs;
}

std::string AgentSystemPrompt(const std::string& base, const ipc::AgentSettings& agent) {
  std::string prompt = base;
  if (agent.write == "none") {
    prompt +=
        "\n\nYou are a read-only agent: the sandbox makes every file, the project included, "
        "read-only for you and for every command you run.";
  }
  if (!agent.prompt.empty()) prompt += "\n\n" + agent.prompt;
  return prompt;
}

Status NarrowSandbox(const ipc::AgentSettings& agent, sandbox::Sandbox* tools) {
  if (agent.network == "off") tools->DisallowNetwork();
  if (agent.write != "none" || !tools->policy().enabled) return Status::Ok();
  return RestrictToReadOnly();
}

}  // namespace forkbox::child
