#include "parent/parent.h"

#include <cstring>

#include "sandbox/sandbox.h"

namespace forkbox::parent {

int ParentMain(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "sandbox") == 0) {
    return sandbox::SandboxCommandMain(argc - 1, argv + 1);
  }
  return 2;  // The CLI is filled in by the parent issue.
}

}  // namespace forkbox::parent
