// Turns Options plus the environment into the validated settings the session runs with.
// Every function fails with a message naming the bad setting; nothing silently falls back.
#pragma once

#include <string>

#include "agent/provider.h"
#include "ipc/messages.h"
#include "base/status.h"
#include "parent/options.h"
#include "sandbox/sandbox.h"

namespace forkbox::parent {

// Flags > environment (agent::ApplyEnvironmentDefaults) > provider defaults.
Result<agent::ProviderConfig> ResolveProviderConfig(const Options& options);

// The absolute, canonical working directory (default: the current directory).
Result<std::string> ResolveWorkdir(const Options& options);
ipc::SandboxSettings ToSandboxSettings(const Options& options);

// --child-path, else $FORKBOX_CHILD, else forkbox-child next to /proc/self/exe. Must be executable.
Result<std::string> ResolveChildPath(const Options& options);

// Creates the directory (and parents) when missing; returns its absolute path.
Result<std::string> PrepareTranscriptDir(const std::string& dir);

}  // namespace forkbox::parent
