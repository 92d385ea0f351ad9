// OpenAI Chat Completions wire format (OpenAI, llama.cpp llama-server, Ollama /v1, vLLM, LM
// Studio): POST {base}/chat/completions with an optional Bearer key. Exposed for tests and fuzzers.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "agent/wire.h"

namespace forkbox::agent {

// The request body: the system prompt as a system message, tool results as role "tool"
// messages, assistant tool calls with string arguments and `content: null` when there is no text.
// Streaming asks for usage (stream_options.include_usage). api.openai.com gets
// max_completion_tokens (its reasoning models reject max_tokens); other servers get max_tokens.
nlohmann::json OpenAiEncodeRequest(const Request& request, const ProviderConfig& config);
// A non-streaming reply body. Tolerates arguments given as an object, missing tool-call ids
// (synthesised) and missing usage.
Decoded OpenAiDecodeBody(std::string_view body);
// A streamed reply (delta chunks ... data: [DONE]).
std::unique_ptr<StreamDecoder> NewOpenAiStreamDecoder(const TextSink& on_text);
// stop, tool_calls (and the legacy function_call), length, content_filter; else kUnknown.
StopReason OpenAiStopReason(std::string_view raw);

}  // namespace forkbox::agent
