// How one response goes on the wire: status, headers and the body in pieces, with the faults
// (cuts, missing stop event, malformed JSON, in-stream errors, pauses) already applied.
// Pure data, so the server glue stays small and the plans are easy to test.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "tests/mock/reply.h"
#include "tests/mock/wire.h"

namespace forkbox::mock {

struct Transmission {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;
  std::vector<std::string> pieces;  // Written one by one (SSE: one event per piece).
  bool chunked = false;             // Chunked transfer (streams); else Content-Length.
  size_t content_length = 0;        // Declared length when not chunked; may exceed the pieces.
  int piece_delay_ms = 0;           // Pause before every piece but the first.
  bool abort_after = false;         // Close the connection after the pieces (a cut).
  bool drop = false;                // Close the socket before any response byte.
  std::string outcome;              // "reply", "fault:<kind>", ...
};

// Ids, stop reason and token counts filled in, per docs/mock.md.
Reply ResolveReply(Reply reply, const WireFormat& wire, uint64_t seq, size_t request_bytes);

// The response for a resolved reply (or its fault) to a request with `stream` set or not.
Transmission PlanReply(const WireFormat& wire, const Reply& reply, const WireContext& ctx,
                       bool stream, const std::string& request_id);

// A provider-shaped error response with the request-id header.
Transmission PlanError(const WireFormat& wire, const ApiError& error,
                       const std::string& request_id);

}  // namespace forkbox::mock
