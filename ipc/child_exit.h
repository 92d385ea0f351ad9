// forkbox-child's exit codes, shared by the child that exits with them and the parent that
// explains them when a child ended without a result or error frame (docs/protocol.md).
#pragma once

namespace forkbox::ipc {

inline constexpr int kChildExitOk = 0;
inline constexpr int kChildExitInternal = 1;  // Unexpected failure (error frame "internal").
inline constexpr int kChildExitBadStart = 2;  // Missing, malformed or oversized start frame.
inline constexpr int kChildExitSandbox = 3;   // The sandbox could not be built or entered.
inline constexpr int kChildExitModel = 4;     // Model error after retries, or bad provider config.
inline constexpr int kChildExitParentGone = 5;  // fd 4 broke: nobody to report to.

// What a non-zero exit code of forkbox-child means ("model error"), or nullptr for a code it
// never uses.
constexpr const char* ChildExitMeaning(int code) {
  switch (code) {
    case kChildExitInternal:
      return "internal error";
    case kChildExitBadStart:
      return "bad start frame";
    case kChildExitSandbox:
      return "sandbox error";
    case kChildExitModel:
      return "model error";
    case kChildExitParentGone:
      return "report pipe broken";
    default:
      return nullptr;
  }
}

}  // namespace forkbox::ipc
