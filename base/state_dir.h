// Where forkbox keeps what it writes for the user across runs: the prompt history and the saved
// sessions. One resolution for the writer (parent/session_store.h) and the read scope, which hides
// it from tools (sandbox/env.cc): it holds what the user typed and every tool output of every
// project.
#pragma once

#include <string>

#include "base/status.h"

namespace forkbox {

// $XDG_STATE_HOME/forkbox when XDG_STATE_HOME is absolute, else $HOME/.local/state/forkbox.
// Touches nothing on disk. An error when neither variable holds an absolute path.
Result<std::string> ForkboxStateDir();

}  // namespace forkbox
