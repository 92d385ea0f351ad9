// Config files, read with toml++: the user's ($XDG_CONFIG_HOME or ~/.config)/forkbox/config.toml
// and the project's <workdir>/.forkbox/config.toml. Keys are the long flag names without the
// dashes (max-parallel = 8, model = "...", allow-net = true, writable = ["/data"]).
// Precedence: flags > environment > project > user. Unknown keys and wrong types are errors
// naming the file, the line and the key. A project file (it comes with a cloned repository) can
// only narrow the sandbox: keys that widen it or redirect the model or the child binary are
// refused there with a message saying where to put them. API keys are never read from a file.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace forkbox::parent {

enum class OptionKind { kFlag, kNumber, kString, kList };

struct ConfigArgs {
  // "--key=value" arguments, the user file's first, to go before the command line's own.
  std::vector<std::string> args;
  // Key -> where it was set ("user config /home/me/.config/forkbox/config.toml:3").
  std::map<std::string, std::string> sources;
};

// `options`: every long option name (without dashes) and its kind. A key the environment already
// sets (provider, model, base-url) is left to the environment.
Result<ConfigArgs> ReadConfigFiles(const std::map<std::string, OptionKind>& options,
                                   const std::string& workdir);

// The environment variable that overrides config key `key`, or "" (for `forkbox config`).
std::string EnvironmentFor(const std::string& key);

}  // namespace forkbox::parent
