#include "tests/mock/transmission.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

namespace forkbox::mock {
namespace {

constexpr const char* kSse = "text/event-stream; charset=utf-8";
constexpr const char* kJson = "application/json";
constexpr int kDefaultSlowDelayMs = 200;

std::string ReasonPhrase(int status) {
  switch (status) {
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Temporarily Unavailable";
    case 504:
      return "Gateway Time-out";
    case 429:
      return "Too Many Requests";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    default:
      return "Error";
  }
}

// An nginx error page, byte for byte as nginx writes it.
std::string NginxPage(int status) {
  const std::string title = std::to_string(status) + " " + ReasonPhrase(status);
  return "<html>\r\n<head><title>" + title + "</title></head>\r\n<body>\r\n<center><h1>" + title +
         "</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";
}

// The event with its JSON payload cut in half (keeps the framing so the client sees a whole
// event whose data does not parse).
std::string Malform(const std::string& event) {
  const size_t data = event.find("data: ");
  if (data == std::string::npos) return "data: {\"type\":\n\n";
  const size_t start = data + 6;
  const size_t end = event.find('\n', start);
  const size_t len = (end == std::string::npos ? event.size() : end) - start;
  return event.substr(0, start) + event.substr(start, std::max<size_t>(1, len / 2)) + "\n\n";
}

void AddRetryHeaders(const Fault& f, Transmission* t) {
  if (!f.retry_after.empty()) t->headers.emplace_back("retry-after", f.retry_after);
  if (!f.retry_after_ms.empty()) t->headers.emplace_back("retry-after-ms", f.retry_after_ms);
  if (!f.should_retry.empty()) t->headers.emplace_back("x-should-retry", f.should_retry);
}

Transmission Body(const std::string& content_type, std::string body, int status) {
  Transmission t;
  t.status = status;
  t.content_type = content_type;
  t.content_length = body.size();
  t.pieces.push_back(std::move(body));
  return t;
}

// The response of a fault that replaces the reply outright (dropped connection, proxy page,
// error status), or nullopt when the fault applies to the reply's bytes instead.
std::optional<Transmission> PlanReplacingFault(const WireFormat& wire, const Fault& f, bool stream,
                                               const std::string& mock_request_id) {
  const bool overloaded_is_529 = wire.format() == Format::kAnthropic;
  const std::string& request_id = f.request_id.empty() ? mock_request_id : f.request_id;
  Transmission t;
  switch (f.kind) {
    case Fault::Kind::kDropConnection:
      t.drop = true;
      break;
    case Fault::Kind::kHtml:
      // A proxy in front of the API answers: no request id, no JSON.
      t = Body("text/html", NginxPage(f.status ? f.status : 502), f.status ? f.status : 502);
      t.headers.emplace_back("server", "nginx");
      if (!f.content_encoding.empty())
        t.headers.emplace_back("content-encoding", f.content_encoding);
      AddRetryHeaders(f, &t);
      break;
    case Fault::Kind::kStatus:
      t = PlanError(wire, ApiError{f.status ? f.status : 500, f.error_type, f.message, "", ""},
                    request_id);
      AddRetryHeaders(f, &t);
      break;
    case Fault::Kind::kStreamError:
      if (!stream) {  // Without a stream the API reports overload as a status.
        const int status = f.status ? f.status : (overloaded_is_529 ? 529 : 503);
        t = PlanError(wire, ApiError{status, f.error_type, f.message, "", ""}, request_id);
        AddRetryHeaders(f, &t);
      }
      break;
    default:
      break;
  }
  if (t.drop || !t.pieces.empty()) {
    t.outcome = "fault:" + FaultKindName(f.kind);
    return t;
  }
  return std::nullopt;
}

// The SSE events of the reply, one per piece, with the reply's stream fault applied.
void PlanStream(const WireFormat& wire, const Reply& reply, const WireContext& ctx,
                Transmission* t) {
  t->chunked = true;
  t->content_type = kSse;
  t->headers.emplace_back("cache-control", "no-cache");
  t->pieces = wire.StreamEvents(reply, ctx);
  if (!reply.fault) return;
  switch (reply.fault->kind) {
    case Fault::Kind::kCutStream: {
      const size_t at = t->pieces.size() / 2;
      const std::string half =
          t->pieces[at].substr(0, std::max<size_t>(1, t->pieces[at].size() / 2));
      t->pieces.resize(at);
      t->pieces.push_back(half);
      t->abort_after = true;
      break;
    }
    case Fault::Kind::kNoStop:
      t->pieces.pop_back();
      break;
    case Fault::Kind::kMalformedJson: {
      const size_t at = std::min<size_t>(1, t->pieces.size() - 1);
      t->pieces[at] = Malform(t->pieces[at]);
      break;
    }
    case Fault::Kind::kStreamError: {
      // A few events of a normal start, then the error instead of the rest.
      t->pieces.resize(std::min<size_t>(t->pieces.size() - 2, 4));
      t->pieces.push_back(wire.StreamErrorEvent(
          ApiError{529, reply.fault->error_type, reply.fault->message, "", ""}));
      break;
    }
    default:
      break;
  }
}

// The JSON body of the reply, with the reply's fault applied to its bytes.
void PlanBody(const WireFormat& wire, const Reply& reply, const WireContext& ctx, Transmission* t) {
  std::string body = wire.Body(reply, ctx);
  t->content_type = kJson;
  t->content_length = body.size();
  if (!reply.fault) {
    t->pieces.push_back(std::move(body));
    return;
  }
  switch (reply.fault->kind) {
    case Fault::Kind::kCutStream:  // Content-Length promises more than arrives.
      t->pieces.push_back(body.substr(0, body.size() / 2));
      t->abort_after = true;
      break;
    case Fault::Kind::kNoStop:
    case Fault::Kind::kMalformedJson:  // A complete HTTP body that is not complete JSON.
      body.resize(body.size() / 2);
      t->content_length = body.size();
      t->pieces.push_back(std::move(body));
      break;
    case Fault::Kind::kSlowStream: {
      const size_t n = 4, step = (body.size() + n - 1) / n;
      for (size_t at = 0; at < body.size(); at += step) t->pieces.push_back(body.substr(at, step));
      break;
    }
    default:
      t->pieces.push_back(std::move(body));
      break;
  }
}

}  // namespace

Reply ResolveReply(Reply reply, const WireFormat& wire, uint64_t seq, size_t request_bytes) {
  if (reply.stop_reason.empty())
    reply.stop_reason = reply.tool_calls.empty() ? "end_turn" : "tool_use";
  size_t output_bytes = reply.text.size();
  for (size_t k = 0; k < reply.tool_calls.size(); ++k) {
    ToolCall& c = reply.tool_calls[k];
    if (c.id.empty()) c.id = wire.ToolCallId(seq, k);
    if (c.input.is_null()) c.input = nlohmann::json::object();
    output_bytes += c.name.size() +
                    c.input.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  }
  if (reply.usage.input_tokens == 0) {
    reply.usage.input_tokens = std::max<int64_t>(1, static_cast<int64_t>(request_bytes / 4));
  }
  if (reply.usage.output_tokens == 0) {
    reply.usage.output_tokens = std::max<int64_t>(1, static_cast<int64_t>(output_bytes / 4));
  }
  return reply;
}

Transmission PlanError(const WireFormat& wire, const ApiError& error,
                       const std::string& request_id) {
  Transmission t = Body(kJson, wire.ErrorBody(error, request_id), error.status);
  t.headers.emplace_back(wire.RequestIdHeader(), request_id);
  t.outcome = "error";
  return t;
}

Transmission PlanReply(const WireFormat& wire, const Reply& reply, const WireContext& ctx,
                       bool stream, const std::string& request_id) {
  if (reply.fault) {
    if (auto t = PlanReplacingFault(wire, *reply.fault, stream, request_id)) return std::move(*t);
  }
  Transmission t;
  t.status = 200;
  t.headers.emplace_back(wire.RequestIdHeader(), request_id);
  t.piece_delay_ms = reply.event_delay_ms;
  t.outcome = reply.fault ? "fault:" + FaultKindName(reply.fault->kind) : "reply";
  if (reply.fault && reply.fault->kind == Fault::Kind::kSlowStream) {
    t.piece_delay_ms =
        reply.fault->event_delay_ms ? reply.fault->event_delay_ms : kDefaultSlowDelayMs;
  }
  if (stream) {
    PlanStream(wire, reply, ctx, &t);
  } else {
    PlanBody(wire, reply, ctx, &t);
  }
  return t;
}

}  // namespace forkbox::mock
