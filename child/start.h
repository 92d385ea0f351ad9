// Reading and checking the one start frame.
#pragma once

#include "ipc/messages.h"
#include "ipc/status.h"

namespace forkbox::child {

// Largest summary a result frame may carry (the frame cap is 1 MiB; leave room for the rest).
inline constexpr int64_t kMaxSummaryBytesCap = 512 * 1024;

// Reads exactly one frame from `fd` (capped at 1 MiB) and checks it is a usable start message:
// absolute workdir, non-empty prompt, limits in range, a transcript fd that is open for writing.
Result<ipc::StartMessage> ReadStart(int fd);

// The TCP port the model is reached on: explicit in the URL, else 443 (https) or 80 (http).
// 0 when the URL has no recognisable scheme.
uint16_t PortFromUrl(const std::string& url);

}  // namespace forkbox::child
