// The HTTP module (forkbox-http.so): an HTTP/1.1 client over POSIX sockets, with TLS from OpenSSL
// 3 (agent/http_transport.h), behind the table in agent/http_module.h. It speaks what the model
// clients need: POST with Content-Length, responses framed by Content-Length, chunked coding or
// the connection's end, keep-alive. Limits a hostile server cannot push past: 64 KiB and 100
// response headers, 4 KiB chunk-size lines, 256 MiB of collected body, 64 MiB of streamed body.
#include <strings.h>

#include <cstring>
#include <ctime>
#include <exception>
#include <memory>

#include "agent/http_module.h"
#include "agent/http_transport.h"
#include "agent/http_url.h"
#include "base/secret.h"

namespace forkbox::agent::http_native {
namespace {

constexpr size_t kMaxHeadBytes = 64 * 1024;
constexpr size_t kMaxHeaders = 100;
constexpr size_t kMaxChunkLine = 4096;
constexpr size_t kMaxCollectedBody = 256 * 1024 * 1024;
// A streamed reply: a model's answer of 128k tokens is a few MiB of events. The parent keeps what
// it decodes (2.5x a 384 MiB stream that a hostile server sent, before this cap).
constexpr size_t kMaxStreamedBody = 64 * 1024 * 1024;

// The response headers the model clients read (provider.cc).
constexpr const char* kResponseHeaders[] = {"content-type", "content-encoding", "request-id",
                                            "x-request-id", "x-should-retry",   "retry-after-ms",
                                            "retry-after"};

HttpFailure Protocol(std::string message) { return {HttpErrorKind::kProtocol, std::move(message)}; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A printable excerpt of what the server sent, for messages.
std::string Excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += (c >= ' ' && c < 0x7f) ? c : '?';
  return out;
}

// Buffered reads from the connection; every byte received resets the idle clock.
class Reader {
 public:
  Reader(Connection& conn, TransferClock& clock) : conn_(conn), clock_(clock) {}
  // The next line without its CRLF (or LF); longer than `max` fails with `too_long`.
  HttpFailure Line(size_t max, const std::string& too_long, std::string* line);
  // Up to `max` buffered or newly read bytes; empty at the connection's end.
  HttpFailure Some(size_t max, std::string_view* out);
  bool any_byte() const { return any_byte_; }

 private:
  HttpFailure Fill();
  Connection& conn_;
  TransferClock& clock_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  bool any_byte_ = false;
};

HttpFailure Reader::Fill() {
  buf_.erase(0, pos_);
  pos_ = 0;
  char chunk[16 * 1024];
  size_t got = 0;
  if (HttpFailure f = conn_.ReadSome(chunk, sizeof(chunk), &got, clock_)) return f;
  if (got == 0) {
    eof_ = true;
    return {};
  }
  any_byte_ = true;
  clock_.Heard();
  buf_.append(chunk, got);
  return {};
}

HttpFailure Reader::Line(size_t max, const std::string& too_long, std::string* line) {
  for (size_t from = pos_;;) {
    const size_t nl = buf_.find('\n', from);
    if (nl != std::string::npos) {
      if (nl - pos_ > max) return Protocol(too_long);
      line->assign(buf_, pos_, nl - pos_);
      if (!line->empty() && line->back() == '\r') line->pop_back();
      pos_ = nl + 1;
      return {};
    }
    const size_t unread = buf_.size() - pos_;
    if (unread > max) return Protocol(too_long);
    if (eof_) {
      return {HttpErrorKind::kReceive,
              any_byte_ ? "the connection closed in the middle of the response"
                        : "the server closed the connection before responding (empty reply)"};
    }
    if (HttpFailure f = Fill()) return f;
    from = pos_ + unread;  // Fill moved the unread bytes to the front.
  }
}

HttpFailure Reader::Some(size_t max, std::string_view* out) {
  while (pos_ == buf_.size() && !eof_) {
    if (HttpFailure f = Fill()) return f;
  }
  const size_t n = std::min(max, buf_.size() - pos_);
  *out = std::string_view(buf_).substr(pos_, n);
  pos_ += n;
  return {};
}

struct Head {
  int minor_version = 1;
  long status = 0;
  std::vector<std::pair<std::string, std::string>> fields;  // Lower-cased names.
};

// "HTTP/1.x NNN[ reason]".
HttpFailure ParseStatusLine(const std::string& line, Head* head) {
  const bool ok = line.size() >= 12 && line.compare(0, 7, "HTTP/1.") == 0 &&
                  (line[7] == '0' || line[7] == '1') && line[8] == ' ' &&
                  std::isdigit(static_cast<unsigned char>(line[9])) &&
                  std::isdigit(static_cast<unsigned char>(line[10])) &&
                  std::isdigit(static_cast<unsigned char>(line[11])) &&
                  (line.size() == 12 || line[12] == ' ') && line[9] >= '1';
  if (!ok) return Protocol("malformed status line from the server: '" + Excerpt(line) + "'");
  head->minor_version = line[7] - '0';
  head->status = std::strtol(line.substr(9, 3).c_str(), nullptr, 10);
  return {};
}

bool IsTokenChar(unsigned char c) {
  return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// Header (or trailer) lines up to the empty line, within *budget bytes and kMaxHeaders fields.
HttpFailure ReadFields(Reader& reader, size_t* budget, Head* head) {
  const std::string too_long =
      "the response headers exceed " + std::to_string(kMaxHeadBytes / 1024) + " KiB";
  std::string line;
  for (;;) {
    if (HttpFailure f = reader.Line(*budget, too_long, &line)) return f;
    *budget -= std::min(*budget, line.size() + 2);
    if (line.empty()) return {};
    if (head->fields.size() >= kMaxHeaders) {
      return Protocol("more than " + std::to_string(kMaxHeaders) + " response headers");
    }
    const size_t colon = line.find(':');
    if (line.front() == ' ' || line.front() == '\t' || colon == std::string::npos || colon == 0) {
      return Protocol("malformed response header line: '" + Excerpt(line) + "'");
    }
    for (size_t i = 0; i < colon; ++i) {
      if (!IsTokenChar(static_cast<unsigned char>(line[i]))) {
        return Protocol("malformed response header name: '" + Excerpt(line) + "'");
      }
    }
    head->fields.emplace_back(Lower(std::string_view(line).substr(0, colon)),
                              std::string(Trim(std::string_view(line).substr(colon + 1))));
  }
}

// The final response's head: interim (1xx) responses are skipped, all within one budget.
HttpFailure ReadHead(Reader& reader, Head* head) {
  size_t budget = kMaxHeadBytes;
  std::string line;
  for (;;) {
    *head = Head{};
    if (HttpFailure f = reader.Line(budget, "the response status line is too long", &line)) {
      return f;
    }
    budget -= std::min(budget, line.size() + 2);
    if (HttpFailure f = ParseStatusLine(line, head)) return f;
    if (HttpFailure f = ReadFields(reader, &budget, head)) return f;
    if (head->status == 101) return Protocol("unexpected 101 Switching Protocols");
    if (head->status >= 200) return {};
  }
}

// Comma-separated tokens of every `name` field contain `token` (case-insensitive).
bool HasToken(const Head& head, std::string_view name, std::string_view token) {
  for (const auto& [field, value] : head.fields) {
    if (field != name) continue;
    std::string_view rest = value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view item = Trim(rest.substr(0, comma));
      if (item.size() == token.size() && strncasecmp(item.data(), token.data(), item.size()) == 0) {
        return true;
      }
      rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
    }
  }
  return false;
}

const std::string* Field(const Head& head, std::string_view name) {
  for (const auto& [field, value] : head.fields) {
    if (field == name) return &value;
  }
  return nullptr;
}

enum class Framing { kNone, kLength, kChunked, kClose };

struct BodyPlan {
  Framing framing = Framing::kClose;
  uint64_t length = 0;
  bool keep_alive = false;
};

// Digits only, at most 18 (no overflow).
bool ParseLength(std::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 18) return false;
  *value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    *value = *value * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

HttpFailure PlanBody(const Head& head, BodyPlan* plan) {
  plan->keep_alive = head.minor_version == 1 ? !HasToken(head, "connection", "close")
                                             : HasToken(head, "connection", "keep-alive");
  if (head.status == 204 || head.status == 304) {
    plan->framing = Framing::kNone;
    return {};
  }
  if (const std::string* te = Field(head, "transfer-encoding")) {
    const size_t comma = te->rfind(',');
    const std::string last =
        Lower(Trim(comma == std::string::npos ? std::string_view(*te)
                                              : std::string_view(*te).substr(comma + 1)));
    plan->framing = last == "chunked" ? Framing::kChunked : Framing::kClose;
    // With Content-Length too, the message is suspect: never reuse the connection (RFC 9112).
    if (Field(head, "content-length") != nullptr) plan->keep_alive = false;
    return {};
  }
  bool seen = false;
  for (const auto& [field, value] : head.fields) {
    if (field != "content-length") continue;
    uint64_t length = 0;
    if (!ParseLength(value, &length) || (seen && length != plan->length)) {
      return Protocol("bad Content-Length in the response: '" + Excerpt(value) + "'");
    }
    seen = true;
    plan->length = length;
  }
  plan->framing = seen ? Framing::kLength : Framing::kClose;
  return {};
}

// Where the body goes: a 2xx body streams into the sink (if any), anything else is collected.
class BodyOut {
 public:
  BodyOut(HttpResult* result, const HttpClient::BodySink& sink)
      : result_(result),
        sink_(sink),
        success_(result->status >= 200 && result->status < 300),
        streaming_(sink && success_) {}
  HttpFailure Put(std::string_view data) {
    if (data.empty()) return {};
    if (streaming_) {
      streamed_ += data.size();
      if (streamed_ > kMaxStreamedBody) {
        return {HttpErrorKind::kTooLarge, "the streamed response exceeds 64 MiB"};
      }
      if (!sink_(data)) {
        return {HttpErrorKind::kAborted, "the transfer was stopped by the body callback"};
      }
      return {};
    }
    if (!success_) {
      // An error body is read up to its cap and no further: an endless one held the caller's
      // memory and time until 256 MiB.
      const size_t room = kMaxErrorBodyBytes - result_->body.size();
      result_->body.append(data.substr(0, room));
      result_->body_cut = data.size() > room;
      return {};
    }
    if (result_->body.size() + data.size() > kMaxCollectedBody) {
      return {HttpErrorKind::kTooLarge, "the response body exceeds 256 MiB"};
    }
    result_->body.append(data);
    return {};
  }
  // Reading stops here (the rest of the body is left unread).
  bool full() const { return result_->body_cut; }

 private:
  HttpResult* result_;
  const HttpClient::BodySink& sink_;
  bool success_;
  bool streaming_;
  size_t streamed_ = 0;
};

// Exactly `length` bytes into `out`.
HttpFailure CopyExactly(Reader& reader, uint64_t length, BodyOut& out) {
  const uint64_t total = length;
  while (length > 0) {
    std::string_view data;
    if (HttpFailure f = reader.Some(std::min<uint64_t>(length, 64 * 1024), &data)) return f;
    if (data.empty()) {
      return {HttpErrorKind::kReceive, "the connection closed after " +
                                           std::to_string(total - length) + " of " +
                                           std::to_string(total) + " body bytes"};
    }
    length -= data.size();
    if (HttpFailure f = out.Put(data)) return f;
    if (out.full()) return {};
  }
  return {};
}

// "1a;ext=v" -> 26. At most 15 hex digits (no overflow).
bool ParseChunkSize(std::string_view line, uint64_t* size, bool* too_large) {
  size_t digits = 0;
  *size = 0;
  while (digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits]))) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(line[digits])));
    if (++digits > 15) {
      *too_large = true;
      return false;
    }
    *size = *size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  const std::string_view rest = Trim(line.substr(digits));
  return digits > 0 && (rest.empty() || rest.front() == ';');
}

HttpFailure CopyChunked(Reader& reader, BodyOut& out) {
  std::string line;
  const std::string too_long = "a chunk-size line longer than 4 KiB";
  for (;;) {
    if (HttpFailure f = reader.Line(kMaxChunkLine, too_long, &line)) return f;
    uint64_t size = 0;
    bool too_large = false;
    if (!ParseChunkSize(line, &size, &too_large)) {
      return Protocol(too_large ? "a chunk size too large: '" + Excerpt(line) + "'"
                                : "bad chunk size: '" + Excerpt(line) + "'");
    }
    if (size == 0) {
      Head trailers;
      size_t budget = kMaxHeadBytes;
      return ReadFields(reader, &budget, &trailers);
    }
    if (HttpFailure f = CopyExactly(reader, size, out)) return f;
    if (out.full()) return {};
    const std::string no_crlf = "no CRLF after a chunk's data";
    if (HttpFailure f = reader.Line(1, no_crlf, &line)) return f;
    if (!line.empty()) return Protocol(no_crlf);
  }
}

HttpFailure CopyToClose(Reader& reader, BodyOut& out) {
  for (;;) {
    std::string_view data;
    if (HttpFailure f = reader.Some(64 * 1024, &data)) return f;
    if (data.empty()) return {};
    if (HttpFailure f = out.Put(data)) return f;
    if (out.full()) return {};
  }
}

// Delta seconds, or an HTTP date (IMF-fixdate, RFC 850, asctime) after `now`; either at most a
// year ahead (a date further out would also overflow the clock's nanoseconds past 2262).
std::optional<std::chrono::milliseconds> RetryAfter(std::string_view value,
                                                    std::chrono::system_clock::time_point now) {
  constexpr int64_t kMaxSeconds = 365ll * 24 * 3600;
  uint64_t seconds = 0;
  if (ParseLength(value, &seconds)) {
    if (seconds == 0 || seconds > kMaxSeconds) return std::nullopt;
    return std::chrono::seconds(seconds);
  }
  const std::string text(value);
  for (const char* format :
       {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"}) {
    struct tm tm {};
    const char* end = ::strptime(text.c_str(), format, &tm);
    if (end == nullptr || *end != '\0') continue;
    const time_t when = ::timegm(&tm);
    const time_t from = std::chrono::system_clock::to_time_t(now);
    if (when < from || when - from > kMaxSeconds) return std::nullopt;
    const auto at = std::chrono::system_clock::from_time_t(when);
    if (at <= now) return std::nullopt;
    return std::chrono::ceil<std::chrono::milliseconds>(at - now);
  }
  return std::nullopt;
}

void CollectHeaders(const Head& head, HttpResult* result) {
  for (const char* name : kResponseHeaders) {
    if (const std::string* value = Field(head, name)) result->headers[name] = *value;
  }
  if (const std::string* value = Field(head, "retry-after")) {
    result->retry_after = RetryAfter(*value, std::chrono::system_clock::now());
  }
}

// One request's head, zeroed before it is freed: it holds the API key.
class RequestHead {
 public:
  ~RequestHead() { WipeString(text_); }
  HttpFailure Build(const ParsedUrl& url, const std::vector<std::string>& headers,
                    size_t body_size);
  std::string_view text() const { return text_; }

 private:
  std::string text_;
};

HttpFailure RequestHead::Build(const ParsedUrl& url, const std::vector<std::string>& headers,
                               size_t body_size) {
  const std::string start = "POST " + url.target + " HTTP/1.1\r\nHost: " + HostPort(url, false);
  const std::string end = "\r\nContent-Length: " + std::to_string(body_size) + "\r\n\r\n";
  size_t size = start.size() + end.size();
  for (const std::string& h : headers) {
    if (h.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos ||
        h.find(':') == std::string::npos) {
      return {HttpErrorKind::kUrl, "a request header is not one 'Name: value' line"};
    }
    size += h.size() + 2;
  }
  text_.reserve(size);  // One allocation: no copy of the key is left behind in freed memory.
  text_ += start;
  for (const std::string& h : headers) {
    text_ += "\r\n";
    text_ += h;
  }
  text_ += end;
  return {};
}

// What one Post needs besides the connection.
struct Exchange {
  const RequestHead* head = nullptr;
  const std::string* body = nullptr;
  const HttpClient::BodySink* sink = nullptr;
  const std::function<void()>* on_sent = nullptr;
  bool sent_told = false;  // The request-sent hook fires once per Post, even across a retry.
};

// Sends the request and reads the response into *result. *keep: the connection may be reused;
// *any_byte: a response byte arrived.
HttpFailure Run(Connection& conn, TransferClock& clock, Exchange& ex, HttpResult* result,
                bool* keep, bool* any_byte) {
  if (HttpFailure f = conn.WriteAll(ex.head->text(), clock)) return f;
  if (HttpFailure f = conn.WriteAll(*ex.body, clock)) return f;
  if (!ex.sent_told) {
    ex.sent_told = true;
    if (*ex.on_sent) (*ex.on_sent)();
  }
  Reader reader(conn, clock);
  Head head;
  HttpFailure f = ReadHead(reader, &head);
  *any_byte = reader.any_byte();
  if (f) return f;
  result->status = head.status;
  CollectHeaders(head, result);
  BodyPlan plan;
  if ((f = PlanBody(head, &plan))) return f;
  BodyOut out(result, *ex.sink);
  switch (plan.framing) {
    case Framing::kNone:
      break;
    case Framing::kLength:
      f = CopyExactly(reader, plan.length, out);
      break;
    case Framing::kChunked:
      f = CopyChunked(reader, out);
      break;
    case Framing::kClose:
      f = CopyToClose(reader, out);
      break;
  }
  // A cut body left bytes unread on the connection.
  *keep = !f && plan.keep_alive && plan.framing != Framing::kClose && !out.full();
  return f;
}

HttpResult Failed(HttpResult result, const HttpFailure& f) {
  result.transport_error = f.message;
  result.error_kind = f.kind;
  result.idle_timeout = f.kind == HttpErrorKind::kIdleTimeout;
  result.cancelled = f.kind == HttpErrorKind::kCancelled;
  result.aborted_by_caller = f.kind == HttpErrorKind::kAborted;
  return result;
}

// The module's client: the kept-alive connection, if any.
struct Client {
  std::unique_ptr<Connection> conn;
};

HttpResult PostOrThrow(Client& client, const HttpTimeouts& timeouts, const std::string& url_text,
                       const std::vector<std::string>& headers, const std::string& body,
                       const HttpClient::BodySink& sink, const CancelCheck& cancelled,
                       const std::function<void()>& on_sent) {
  Result<ParsedUrl> url = ParseHttpUrl(url_text);
  if (!url.ok()) return Failed({}, {HttpErrorKind::kUrl, "bad URL: " + url.status().message()});
  if (url->has_userinfo) {
    return Failed({}, {HttpErrorKind::kUrl,
                       "the URL carries user:password@ credentials; they "
                       "are never sent (put the key in the settings)"});
  }
  RequestHead head;
  if (HttpFailure f = head.Build(*url, headers, body.size())) return Failed({}, f);
  Exchange ex{&head, &body, &sink, &on_sent};
  TransferClock clock(timeouts, &cancelled);
  for (;;) {
    const bool reused = client.conn != nullptr && client.conn->Serves(*url);
    if (!reused) {
      HttpFailure f;
      client.conn = Connection::Open(*url, clock, &f);
      if (client.conn == nullptr) return Failed({}, f);
    }
    HttpResult result;
    bool keep = false;
    bool any_byte = false;
    const HttpFailure f = Run(*client.conn, clock, ex, &result, &keep, &any_byte);
    if (!keep) client.conn.reset();
    if (!f) {
      result.reused_connection = reused;
      return result;
    }
    // A kept-alive connection the server closed while idle: once more on a new one.
    const bool stale = reused && !any_byte &&
                       (f.kind == HttpErrorKind::kSend || f.kind == HttpErrorKind::kReceive);
    if (!stale) return Failed(std::move(result), f);
  }
}

// --- The module's table: no exception crosses it. ---------------------------------------------

void UseTlsModule(const http_tls::Api* tls) { UseTls(tls); }

void* Create(std::string* error) {
  try {
    return new Client;
  } catch (const std::exception& e) {
    *error = std::string("HTTP module: ") + e.what();
    return nullptr;
  }
}

void Destroy(void* handle) { delete static_cast<Client*>(handle); }

HttpResult Post(void* handle, const HttpTimeouts& timeouts, const std::string& url,
                const std::vector<std::string>& headers, const std::string& body,
                const HttpClient::BodySink& sink, const CancelCheck& cancelled,
                const std::function<void()>& on_sent) {
  Client& client = *static_cast<Client*>(handle);
  try {
    return PostOrThrow(client, timeouts, url, headers, body, sink, cancelled, on_sent);
  } catch (const std::exception& e) {
    client.conn.reset();
    return Failed({}, {HttpErrorKind::kInternal, std::string("HTTP module: ") + e.what()});
  }
}

}  // namespace
}  // namespace forkbox::agent::http_native

extern "C" __attribute__((visibility("default"))) const forkbox::agent::http_module::Api*
forkbox_http_module() {
  using namespace forkbox::agent;
  static const http_module::Api api{http_module::kAbiVersion, &http_native::UseTlsModule,
                                    &http_native::Create, &http_native::Destroy,
                                    &http_native::Post};
  return &api;
}
