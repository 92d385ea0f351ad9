// Keeping a conversation inside the model's context window: the window of known models, a token
// estimate for what the provider has not measured yet, and folding old tool results into short
// placeholders (issue 15). Shared by the parent's and the child's loops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/message.h"

namespace forkbox::agent {

// The context window in tokens of a known model (matched by name prefix), else 0 (unknown: the
// loop then compacts only when the provider answers "too long").
int64_t KnownContextWindow(const std::string& model);

// Rough tokens of text the provider has not counted yet: bytes / 4 rounded up.
int64_t EstimateTokens(int64_t bytes);
// Bytes of a message as the model reads it (text, tool inputs and results, thinking).
int64_t MessageBytes(const Message& m);

// The placeholder that replaces a folded tool result. Starts with kFoldedPrefix.
inline constexpr const char* kFoldedPrefix = "[tool result folded to save context: ";
std::string FoldedResult(const ToolUseBlock& call, int64_t original_bytes);

// Folds the oldest tool results of `messages` (oldest first) until at least `bytes_to_free`
// bytes are freed or nothing is left to fold. Never folds the results of the last message
// holding tool results (the latest stay whole), results already folded, nor results of the tools
// named in `keep` (the parent keeps its task summaries). Returns the bytes freed. Each fold
// rewrites the conversation from the first folded result on, so callers fold in one go and
// leave the new prefix alone afterwards (one cache miss per compaction).
int64_t FoldOldToolResults(std::vector<Message>& messages, int64_t bytes_to_free,
                           const std::vector<std::string>& keep);

}  // namespace forkbox::agent
