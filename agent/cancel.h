// Cancelling blocking waits when the user presses Ctrl-C.
//
// The parent's handler of kStopSignals records the signal; a CancelCheck reads that record.
// A wait must not miss a signal that lands between the check and the wait, so the signals are
// blocked around the check and the wait unblocks them atomically (ppoll): a signal either came
// before the check (the check sees it) or interrupts the wait (EINTR, and the caller checks
// again).
#pragma once

#include <poll.h>
#include <signal.h>

#include <chrono>
#include <functional>

namespace forkbox::agent {

// The signals that stop a session, which its handler records and a CancelCheck reads: Ctrl-C,
// SIGTERM, the terminal's hang-up and Ctrl-\ (SIGQUIT: in layer 1, where the session process is not
// a PID namespace's init, its default action ended the session at once and left the tools
// running and what they planted in git's trust surface).
inline constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// True once the current operation should stop. Empty: never.
using CancelCheck = std::function<bool()>;

// poll(2) that also returns when `cancelled` becomes true. With a check, the wait itself runs
// with kStopSignals unblocked (whatever the mask was) and the check with them blocked.
// Returns what ppoll returns (-1 with errno EINTR when a signal interrupted the wait), or 0 with
// *was_cancelled set when the check said stop before waiting. `timeout_ms` < 0: no limit.
int PollUnlessCancelled(pollfd* fds, nfds_t nfds, int timeout_ms, const CancelCheck& cancelled,
                        bool* was_cancelled);

// Sleeps for `duration`, or less when `cancelled` becomes true. Returns false when cancelled.
bool SleepUnlessCancelled(std::chrono::milliseconds duration, const CancelCheck& cancelled);

}  // namespace forkbox::agent
