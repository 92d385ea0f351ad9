// Test helper: the mock replies every end-to-end parent test scripts (text, or tool calls), with
// the usage the mock reports for them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tests/mock/mock_server.h"

namespace forkbox::parent_test {

inline mock::Reply Text(const std::string& text, int64_t in = 0, int64_t out = 0) {
  mock::Reply r;
  r.text = text;
  r.usage.input_tokens = in;
  r.usage.output_tokens = out;
  return r;
}

inline mock::Reply Calls(std::vector<mock::ToolCall> calls, int64_t in = 0, int64_t out = 0) {
  mock::Reply r;
  r.tool_calls = std::move(calls);
  r.usage.input_tokens = in;
  r.usage.output_tokens = out;
  return r;
}

// An HTTP error status (401, 500...) instead of a reply.
inline mock::Reply HttpStatus(int status) {
  mock::Reply r;
  mock::Fault f;
  f.kind = mock::Fault::Kind::kStatus;
  f.status = status;
  r.fault = f;
  return r;
}

}  // namespace forkbox::parent_test
