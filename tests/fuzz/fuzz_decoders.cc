// libFuzzer target: both providers' reply decoders, streaming (with arbitrary chunking) and not,
// on arbitrary bytes. They must never crash or throw, and a decoded reply must be usable: tool
// inputs are objects and the message encodes back into a request.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/anthropic.h"
#include "agent/openai.h"

namespace {

using forkbox::agent::Decoded;

void Check(const Decoded& d, bool anthropic) {
  if (!d.result.ok()) {
    if (d.result.error->message.empty()) std::abort();  // Errors always say something.
    return;
  }
  const forkbox::agent::Message& m = d.result.response.message;
  // A malformed call keeps its arguments as they came (agent/message.h): the loop answers it with
  // an is_error result, so only the id and the name must be there.
  for (const auto& use : forkbox::agent::ToolUsesOf(m)) {
    if (use.id.empty() || use.name.empty()) std::abort();
  }
  forkbox::agent::Request request;
  request.messages.push_back(m);
  forkbox::agent::ProviderConfig config;
  const nlohmann::json body = anthropic ? forkbox::agent::AnthropicEncodeRequest(request, config)
                                        : forkbox::agent::OpenAiEncodeRequest(request, config);
  (void)body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Whatever the model sent, what goes back is well-formed: {} in place of malformed arguments.
  for (const auto& message : body["messages"]) {
    if (anthropic && message["content"].is_array()) {
      for (const auto& block : message["content"]) {
        if (block.value("type", "") == "tool_use" && !block["input"].is_object()) std::abort();
      }
    }
    if (!anthropic && message.contains("tool_calls")) {
      for (const auto& call : message["tool_calls"]) {
        const auto& args = call["function"]["arguments"];
        if (!args.is_string() ||
            !nlohmann::json::parse(args.get<std::string>(), nullptr, false).is_object()) {
          std::abort();
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const unsigned mode = data[0] % 4;
  const size_t step = data[1] % 32 + 1;
  const std::string_view input(reinterpret_cast<const char*>(data + 2), size - 2);
  const bool anthropic = mode % 2 == 0;
  if (mode < 2) {
    Check(anthropic ? forkbox::agent::AnthropicDecodeBody(input)
                    : forkbox::agent::OpenAiDecodeBody(input),
          anthropic);
    return 0;
  }
  size_t text_bytes = 0;
  auto sink = [&](std::string_view t) { text_bytes += t.size(); };
  auto decoder = anthropic ? forkbox::agent::NewAnthropicStreamDecoder(sink)
                           : forkbox::agent::NewOpenAiStreamDecoder(sink);
  for (size_t i = 0; i < input.size(); i += step) {
    if (!decoder->Feed(input.substr(i, step))) break;
  }
  Check(decoder->Finish(), anthropic);
  return 0;
}
