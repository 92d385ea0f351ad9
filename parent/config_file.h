// Config files, read with toml++: the user's ($XDG_CONFIG_HOME or ~/.config)/forkbox/config.toml
// and the project's <workdir>/.forkbox/config.toml. Keys are the long flag names without the
// dashes (max-parallel = 8, model = "...", allow-net = true, writable = ["/data"]).
// Precedence: flags > environment > project > user (parent/cli.h applies it). Unknown keys and
// wrong types are errors naming the file, the line and the key. A project file (it comes with a
// cloned repository) can only narrow the sandbox: keys that widen it or redirect the model or the
// child binary are refused there with a message saying where to put them. API keys are never read
// from a file.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace forkbox::parent {

enum class OptionKind { kFlag, kInteger, kNumber, kString, kList };

// One key of a config file.
struct ConfigEntry {
  std::string key;
  // The value as command-line values: "true", "8", "0.5" (a float in its shortest exact form),
  // a string, each item of a list.
  std::vector<std::string> values;
  std::string where;  // "user config /home/me/.config/forkbox/config.toml:3"
  bool project = false;
};

// Reads the user file, then the project file of the workdir: `workdir` (the --workdir flag), else
// the user file's `workdir`, else the current directory. `options`: every long option name
// (without dashes) and its kind. Appends each file's keys to *out, the user file's first. On an
// error *out keeps what was read before it (the error still takes the files' output format).
Status ReadConfigFiles(const std::map<std::string, OptionKind>& options, const std::string& workdir,
                       std::vector<ConfigEntry>* out);

}  // namespace forkbox::parent
