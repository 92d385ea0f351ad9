#include "parent/agents_command.h"

#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/format.h"
#include "parent/cli.h"
#include "parent/config.h"
#include "parent/exit_codes.h"
#include "parent/terminal.h"

namespace forkbox::parent {
namespace {

std::string DescribeAgent(const agent::AgentType& a, bool allow_net, bool sandbox) {
  std::string out = a.name + "  (" + a.source + ")\n";
  out += "  " + (a.description.empty() ? std::string("(no description)") : a.description) + "\n";
  out += "  tools:     " + (a.tools.empty() ? std::string("none") : JoinList(a.tools)) + "\n";
  std::string model = a.model.empty() || a.model == "inherit" ? "the session's" : a.model;
  out += "  model:     " + model + "\n";
  if (a.max_turns > 0) out += "  max turns: " + std::to_string(a.max_turns) + "\n";
  if (a.timeout_ms > 0) out += "  timeout:   " + std::to_string(a.timeout_ms / 1000) + " s\n";
  out += "  sandbox:   " + agent::DescribeSandbox(a, allow_net, sandbox) + "\n";
  for (const std::string& o : a.overrides) out += "  overrides: " + o + "\n";
  for (const std::string& n : a.notes) out += "  note: " + n + "\n";
  return out;
}

}  // namespace

agent::AgentCatalog LoadAgents(const std::string& workdir) {
  const char* home = std::getenv("HOME");
  return agent::LoadAgentCatalog(agent::AgentDirs(workdir, home != nullptr ? home : ""));
}

Result<agent::AgentType> ResolveSubagentType(const agent::AgentCatalog& catalog,
                                             const nlohmann::json& input) {
  std::string name = agent::kDefaultAgentType;
  auto it = input.find("subagent_type");
  if (it != input.end() && !it->is_null()) {
    if (!it->is_string()) {
      return Status::InvalidArgument("task: invalid input: 'subagent_type' must be a string");
    }
    name = it->get<std::string>();
  }
  const agent::AgentType* type = catalog.Find(name);
  if (type == nullptr) {
    return Status::InvalidArgument("task: unknown subagent_type '" + name +
                                   "'; the available agents are: " + JoinList(catalog.Names()));
  }
  return *type;
}

int AgentsCommandMain(int argc, char** argv) {
  // A session's flags and config files: the sandbox shown is the one such a session gets.
  CliOutcome cli = ParseCommandLine(argc, argv, CliCommand::kAgents);
  WriteText(STDERR_FILENO, cli.err);
  if (!cli.options) return PrintOutput(cli.out, cli.exit_code);
  const Options& o = *cli.options;
  Result<std::string> workdir = ResolveWorkdir(o);
  if (!workdir.ok()) {
    WriteText(STDERR_FILENO, "forkbox agents: " + workdir.status().message() + "\n");
    return kExitUsage;
  }
  agent::AgentCatalog catalog = LoadAgents(*workdir);
  if (o.sandbox.read_only) agent::MakeReadOnly(&catalog);
  agent::RestrictTools(&catalog, o.tools);
  std::string out = "Agents for " + *workdir +
                    " (precedence: project forkbox > project claude > user forkbox > user "
                    "claude > built-in; a task names one with subagent_type, default general)\n";
  // Shown first: without the task tool none of the agents below can run in such a session.
  if (!o.subagents) {
    out +=
        "\nnote: no session with these flags runs any of them: the task tool is turned off "
        "(--no-subagents, --tools or --disallowed-tools)\n";
  }
  for (const agent::AgentType& a : catalog.agents) {
    out += "\n" + DescribeAgent(a, o.sandbox.allow_net, o.sandbox.enabled);
  }
  if (!catalog.warnings.empty()) out += "\nwarnings:\n";
  for (const std::string& w : catalog.warnings) out += "  " + w + "\n";
  return PrintOutput(out, kExitOk);
}

}  // namespace forkbox::parent
