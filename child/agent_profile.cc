#include "child/agent_profile.h"

#include <algorithm>

#include "agent/tools.h"
#include "sandbox/sandbox.h"

namespace forkbox::child {
namespace {

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
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
    prompt += "\n\n" + std::string(agent::kReadOnlyNote);
  }
  if (!agent.prompt.empty()) prompt += "\n\n" + agent.prompt;
  return prompt;
}

Status NarrowSandbox(const ipc::AgentSettings& agent, sandbox::Sandbox* tools,
                     sandbox::TaskTmpDir* tmp) {
  if (agent.network == "off") tools->DisallowNetwork();
  if (agent.write != "none") return Status::Ok();
  Result<sandbox::TaskTmpDir> made =
      sandbox::TaskTmpDir::Create(tools->policy().workdir, sandbox::ShortLink::kShmDir);
  if (!made.ok()) return made.status().WithContext("write: none: the temp dir");
  *tmp = std::move(*made);
  tools->set_tmpdir(*tmp);
  if (!tools->policy().enabled) return Status::Ok();
  return sandbox::RestrictToReadOnly(tools->policy(), {}, tmp).WithContext("write: none");
}

}  // namespace forkbox::child
