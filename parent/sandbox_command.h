// `forkbox sandbox`: the CLI front end of the sandbox library.
#pragma once

namespace forkbox::parent {

// `forkbox sandbox [--workdir DIR] [--allow-net] [--writable PATH]... [--env NAME]... -- CMD...`
// and `forkbox sandbox --check`. argv[0] is "sandbox". Returns the process exit code (125 when
// the wrapper itself failed, like env(1) and docker; 2 for usage errors).
int SandboxCommandMain(int argc, char** argv);

}  // namespace forkbox::parent
