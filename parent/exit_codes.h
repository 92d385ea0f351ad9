// The documented exit codes of `forkbox` (also printed by --help).
#pragma once

namespace forkbox::parent {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // An unexpected internal error (the message says which).
inline constexpr int kExitUsage = 2;    // Bad command line or configuration.
inline constexpr int kExitModel = 3;    // The model call failed, or the model refused (one-shot).
inline constexpr int kExitSandbox = 4;  // The sandbox cannot be enforced (see --sandbox=off).
inline constexpr int kExitInterrupted = 130;  // SIGINT (Ctrl-C); SIGTERM 143, SIGHUP 129.

inline constexpr const char* kExitCodesHelp =
    "Exit codes:\n"
    "  0    success\n"
    "  1    internal error\n"
    "  2    usage or configuration error\n"
    "  3    model error (HTTP/transport failure, or a refusal in one-shot mode)\n"
    "  4    sandbox unavailable (the kernel cannot enforce it; --sandbox=off opts out)\n"
    "  130  interrupted by Ctrl-C (143 for SIGTERM, 129 for SIGHUP)\n";

}  // namespace forkbox::parent
