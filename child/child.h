// forkbox-child: runs one task. Reads a start frame on fd 3 (ipc/frame.h), sandboxes itself,
// runs the tool loop from an empty context, reports events and one result (or error) on fd 4.
// As a standby (a prepare frame first) it sandboxes itself before the task exists and then waits
// for the start frame (docs/protocol.md).
//
// Exit codes: 0 after a result frame, or for a standby retired unused (fd 3 closed before a start
// frame; no frame is written); otherwise an error frame was sent (when fd 4 was usable) and the
// code names the failure class.
#pragma once

#include "ipc/child_exit.h"

namespace forkbox::child {

// The codes themselves are shared with the parent (ipc/child_exit.h).
inline constexpr int kExitOk = ipc::kChildExitOk;
inline constexpr int kExitInternal = ipc::kChildExitInternal;
inline constexpr int kExitBadStart = ipc::kChildExitBadStart;
inline constexpr int kExitSandbox = ipc::kChildExitSandbox;
inline constexpr int kExitModel = ipc::kChildExitModel;
inline constexpr int kExitParentGone = ipc::kChildExitParentGone;

// Returns the process exit code: 0 after a result frame, non-zero after an error frame. With
// argv[1] "--spawner" it serves as the parent's spawner instead (child/spawner.h).
int ChildMain(int argc, char** argv);

}  // namespace forkbox::child
