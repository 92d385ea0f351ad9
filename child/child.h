// forkbox-child: runs one task. Reads one start frame on fd 3 (ipc/frame.h), sandboxes itself,
// runs the tool loop from an empty context, reports events and one result (or error) on fd 4.
#pragma once

namespace forkbox::child {

// Returns the process exit code: 0 after a result frame, non-zero after an error frame.
int ChildMain(int argc, char** argv);

}  // namespace forkbox::child
