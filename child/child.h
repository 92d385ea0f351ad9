// forkbox-child: runs one task. Reads a start frame on fd 3 (ipc/frame.h), sandboxes itself,
// runs the tool loop from an empty context, reports events and one result (or error) on fd 4.
// As a standby (a prepare frame first) it sandboxes itself before the task exists and then waits
// for the start frame (docs/protocol.md).
//
// Exit codes: 0 after a result frame, or for a standby retired unused (fd 3 closed before a start
// frame; no frame is written); otherwise an error frame was sent (when fd 4 was usable) and the
// code names the failure class.
#pragma once

namespace forkbox::child {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;    // Unexpected failure (error frame code "internal").
inline constexpr int kExitBadStart = 2;    // Missing, malformed or oversized start frame.
inline constexpr int kExitSandbox = 3;     // The sandbox could not be built or entered.
inline constexpr int kExitModel = 4;       // Model error after retries, or bad provider config.
inline constexpr int kExitParentGone = 5;  // fd 4 broke: nobody to report to.

// Returns the process exit code: 0 after a result frame, non-zero after an error frame. With
// argv[1] "--spawner" it serves as the parent's spawner instead (child/spawner.h).
int ChildMain(int argc, char** argv);

}  // namespace forkbox::child
