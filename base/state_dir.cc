#include "base/state_dir.h"

#include <cstdlib>

namespace forkbox {

Result<std::string> ForkboxStateDir() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && x[0] == '/') {
    return std::string(x) + "/forkbox";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    return std::string(home) + "/.local/state/forkbox";
  }
  return Status::InvalidArgument("no state directory: set XDG_STATE_HOME or HOME");
}

}  // namespace forkbox
