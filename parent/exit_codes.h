// The documented exit codes of `forkbox` (also printed by --help).
#pragma once

namespace forkbox::parent {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // An internal error, or stdout could not be written.
inline constexpr int kExitUsage = 2;    // Bad command line or configuration.
inline constexpr int kExitModel = 3;    // The model call failed, or the model refused (one-shot).
inline constexpr int kExitSandbox = 4;  // The sandbox cannot be enforced (see --sandbox=off).
// The run stopped before it finished (--max-turns or --max-tokens-total ran out, or the final
// answer was cut short); what it answered is on stdout. As `claude -p`, a script's `&&` must not
// take it for a finished job.
inline constexpr int kExitIncomplete = 5;
// SIGINT (Ctrl-C); SIGTERM 143, SIGHUP 129, SIGQUIT 131. As a shell reports them: forkbox dies of
// the signal (parent/signals.h), and its caller's wait status says so.
inline constexpr int kExitInterrupted = 130;
inline constexpr int kExitBrokenPipe = 141;  // stdout's reader is gone (EPIPE): 128 + SIGPIPE.

inline constexpr const char* kExitCodesHelp =
    "Exit codes:\n"
    "  0    success\n"
    "  1    internal error, or stdout could not be written (ENOSPC, EIO...)\n"
    "  2    usage or configuration error\n"
    "  3    model error (HTTP/transport failure, a refusal, malformed tool calls only, or no\n"
    "       answer at all, in one-shot mode)\n"
    "  4    sandbox unavailable (the kernel cannot enforce it; --sandbox=off opts out)\n"
    "  5    stopped before the end: --max-turns or --max-tokens-total ran out, or the answer was\n"
    "       cut short (max tokens, context window); stdout has what was answered\n"
    "  130  interrupted by Ctrl-C (143 for SIGTERM, 129 for SIGHUP, 131 for SIGQUIT; 137 when\n"
    "       forkbox's pid was killed by SIGKILL): forkbox dies of the signal, which a shell\n"
    "       reports as 128 + it\n"
    "  141  stdout's reader went away (EPIPE, as if killed by SIGPIPE)\n";

}  // namespace forkbox::parent
