// Turns Options plus the environment into the validated settings the session runs with.
// Every function fails with a message naming the bad setting; nothing silently falls back.
#pragma once

#include <string>
#include <vector>

#include "agent/provider_settings.h"
#include "base/status.h"
#include "ipc/messages.h"
#include "parent/options.h"
#include "sandbox/sandbox.h"

namespace forkbox::parent {

// The absolute, canonical working directory (default: the current directory).
Result<std::string> ResolveWorkdir(const Options& options);

// The forkbox-child to run, as named, and where the name came from: --child-path, else
// $FORKBOX_CHILD, else the config files' child-path, else forkbox-child next to /proc/self/exe.
struct ChildPathChoice {
  std::string path;
  agent::SettingSource from;  // kGiven: --child-path.
};
Result<ChildPathChoice> ChooseChildPath(const Options& options);

// ChooseChildPath's file, canonical. Must be executable.
Result<std::string> ResolveChildPath(const Options& options);

// forkbox-child (canonical) and the directory of the modules it loads before its sandbox start
// with the spawner's rights at every task: one a task could replace (it lies in one of
// sandbox::PersistentWritableTrees: the workdir, a --writable path, layer 1's shared /dev/shm)
// would run the task's code outside the sandbox at the next task's start. Such a layout is
// refused (kInvalidArgument, naming the file and the tree).
Status CheckChildOutsideWritableTrees(const std::string& child_path,
                                      const std::vector<std::string>& writable_trees);

// The session's sandbox policy: sandbox::ResolvePolicy of `settings` for `workdir`, with the
// model's TCP port (agent::UrlPort of `model_url`; 0 only for a URL no request can use). The
// parent's own Landlock ruleset is an agent's, so its TCP connects reach that port only, as a
// child's do; the children get the same port (ipc::ChildSandboxHints).
Result<sandbox::Policy> SessionPolicy(const sandbox::Settings& settings, const std::string& workdir,
                                      const std::string& model_url);

}  // namespace forkbox::parent
