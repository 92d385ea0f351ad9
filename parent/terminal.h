// Terminal hygiene. Text that reaches a terminal may come from the model (answers, tool names,
// error messages quoting it): escape sequences in it could retitle the window, write the
// clipboard (OSC 52) or fake output. Everything forkbox writes to a terminal goes through
// NeutraliseControls; what goes to a pipe or file keeps the model's bytes.
#pragma once

#include <string>
#include <string_view>

namespace forkbox::parent {

// C0 controls except \n and \t, DEL, the C1 controls (U+0080..U+009F) and the bidirectional
// controls (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069: they reorder what is shown)
// become visible escapes ("\x1b", "\u009b", "\u202e"); bytes that are not valid UTF-8 become
// "\xNN" (a terminal may read a lone 0x9b as CSI). Everything else is unchanged.
std::string NeutraliseControls(std::string_view text);

// Writes all of `text` to `fd` (retrying EINTR), neutralised when `fd` is a terminal. Returns 0,
// or the errno of the write that failed (EPIPE: the reader is gone; ENOSPC, EIO...).
int WriteAll(int fd, std::string_view text);
// WriteAll, best effort: for stderr and output whose loss changes nothing.
void WriteText(int fd, std::string_view text);
// Whether `fd` is a terminal that moves its cursor as told: a terminal whose TERM is set and not
// "dumb" (Emacs' M-x shell and compile, some CI runners set it: a cursor control there is shown as
// garbage). Git and most CLIs draw their live displays on such terminals alone.
bool TakesCursorControls(int fd);
// Writes what a command prints as its point (--help, --version, `forkbox sessions`) to stdout and
// returns `code`; a failed write is an error exit instead (kExitBrokenPipe for EPIPE, else
// kExitFailure), said on stderr.
int PrintOutput(std::string_view text, int code);

}  // namespace forkbox::parent
