// `sandbox_cmd ARGS...` == `forkbox sandbox ARGS...`: lets the tests drive the command without
// depending on the rest of the forkbox binary.
#include "sandbox/sandbox.h"

int main(int argc, char** argv) { return forkbox::sandbox::SandboxCommandMain(argc, argv); }
