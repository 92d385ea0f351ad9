// Anthropic Messages wire format: POST {base}/v1/messages, x-api-key, anthropic-version 2023-06-01.
// Exposed for tests and fuzzers; the rest of the code goes through MakeProvider.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "agent/wire.h"

namespace forkbox::agent {

// The request body. With config.prompt_caching the system prompt becomes one text block and it and
// the last tool carry cache_control {"type":"ephemeral"}. Empty text blocks are never sent; the
// max_tokens sent is the smaller of the request's and the config's (when both are set).
nlohmann::json AnthropicEncodeRequest(const Request& request, const ProviderConfig& config);
// A non-streaming reply body.
Decoded AnthropicDecodeBody(std::string_view body);
// A streamed reply (message_start ... message_stop).
std::unique_ptr<StreamDecoder> NewAnthropicStreamDecoder(const TextSink& on_text);
// end_turn, tool_use, max_tokens, stop_sequence, pause_turn, refusal,
// model_context_window_exceeded; anything else is kUnknown.
StopReason AnthropicStopReason(std::string_view raw);

}  // namespace forkbox::agent
