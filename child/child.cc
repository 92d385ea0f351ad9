#include "child/child.h"

namespace forkbox::child {

int ChildMain(int, char**) { return 1; }

}  // namespace forkbox::child
