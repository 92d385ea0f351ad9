// forkbox: the user-facing CLI. `forkbox [OPTIONS] [PROMPT]` and `forkbox sandbox ...`.
#pragma once

namespace forkbox::parent {

// Parses arguments and runs; returns the process exit code (see README: exit codes).
int ParentMain(int argc, char** argv);

}  // namespace forkbox::parent
