// Nothing outlives the child: as a child subreaper it inherits every orphaned descendant, and at
// the end it kills and reaps them all.
#pragma once

#include "ipc/status.h"

namespace forkbox::child {

// PR_SET_CHILD_SUBREAPER on the calling process.
Status BecomeSubreaper();

// SIGKILLs and reaps every child of this process, repeatedly, until none is left (killing one
// re-parents its own children to us). Returns how many processes were killed.
int KillAllDescendants();

}  // namespace forkbox::child
