// `sandbox_cmd ARGS...` == `forkbox sandbox ARGS...`: lets the tests drive the command without
// depending on the rest of the forkbox binary.
#include "parent/sandbox_command.h"

int main(int argc, char** argv) { return forkbox::parent::SandboxCommandMain(argc, argv); }
