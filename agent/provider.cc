#include "agent/provider.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "agent/anthropic.h"
#include "agent/http_client.h"
#include "agent/openai.h"
#include "agent/provider_settings.h"
#include "agent/retry.h"
#include "agent/wire.h"
#include "base/format.h"

namespace forkbox::agent {

namespace {

using nlohmann::json;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A short, single-line, tag-free excerpt of an error page.
std::string PageExcerpt(std::string_view body, size_t max_chars = 200) {
  std::string out;
  bool in_tag = false, space = false;
  for (char c : body) {
    if (c == '<') {
      in_tag = true;
      space = true;
    } else if (c == '>') {
      in_tag = false;
    } else if (!in_tag) {
      if (std::isspace(static_cast<unsigned char>(c))) {
        space = true;
      } else {
        if (space && !out.empty()) out += ' ';
        space = false;
        out += c;
      }
    }
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
  }
  MakeValidUtf8(out);
  return out;
}

bool LooksLikeContextOverflow(const ModelError& e) {
  const std::string text = Lower(e.error_type + " " + e.message);
  return text.find("prompt is too long") != std::string::npos ||
         text.find("context_length_exceeded") != std::string::npos ||
         text.find("maximum context length") != std::string::npos ||
         text.find("context window") != std::string::npos ||
         text.find("context length") != std::string::npos;
}

ModelError HttpError(const HttpResult& http) {
  ModelError e;
  e.kind = ModelError::Kind::kHttp;
  e.http_status = static_cast<int>(http.status);
  if (!ParseErrorBody(http.body, e)) {
    auto ct = http.headers.find("content-type");
    const size_t first = http.body.find_first_not_of(" \t\r\n");
    const bool html = (ct != http.headers.end() && ct->second.find("html") != std::string::npos) ||
                      (first != std::string::npos && http.body[first] == '<');
    JsonDiscard why;
    const bool is_json = !ParseModelJson(http.body, &why).is_discarded();
    if (http.body.empty()) {
      e.message = "empty error body";
    } else if (is_json) {
      // JSON, but without the error object or text every API sends (`{}`).
      e.message = "JSON error body without an error message: " + PageExcerpt(http.body);
    } else if (why.too_deep || why.repeated_key) {
      e.message = "error body that is " + why.Describe() + ": " + PageExcerpt(http.body);
    } else {
      e.message = std::string(html ? "non-JSON error page: " : "non-JSON error body: ") +
                  PageExcerpt(http.body);
    }
  }
  if (e.message.empty()) e.message = "no error message";
  if (http.body_cut) {
    e.message += " (the error body was cut at " + std::to_string(kMaxErrorBodyBytes >> 20) +
                 " MiB; the rest was not read)";
  }
  if ((e.http_status == 400 || e.http_status == 413) && LooksLikeContextOverflow(e)) {
    e.kind = ModelError::Kind::kContextOverflow;
  }
  return e;
}

// Why a 2xx reply could not be decoded, where its headers tell: a proxy's or captive portal's page,
// or a body in an encoding forkbox never asked for. Empty when the headers look right.
std::string UnexpectedReplyNote(const HeaderMap& headers, bool stream) {
  std::string note;
  if (auto it = headers.find("content-encoding");
      it != headers.end() && Lower(it->second) != "identity") {
    note =
        "content-encoding \"" + PageExcerpt(it->second, 40) + "\", which forkbox did not ask for";
  }
  const std::string expected = stream ? "text/event-stream" : "application/json";
  if (auto it = headers.find("content-type");
      it != headers.end() && Lower(it->second).find(expected) == std::string::npos) {
    if (!note.empty()) note += "; ";
    note += "content-type \"" + PageExcerpt(it->second, 60) + "\", not " + expected;
  }
  return note.empty() ? "" : " (the reply has " + note + ")";
}

std::string RequestIdOf(const HeaderMap& headers) {
  for (const char* name : {"request-id", "x-request-id"}) {
    if (auto it = headers.find(name); it != headers.end() && !it->second.empty()) return it->second;
  }
  return "";
}

class ProviderImpl : public Provider {
 public:
  ProviderImpl(ProviderConfig config, std::unique_ptr<WireFormat> wire,
               std::unique_ptr<HttpClient> http, ProviderHooks hooks)
      : config_(std::move(config)),
        wire_(std::move(wire)),
        http_(std::move(http)),
        hooks_(std::move(hooks)) {}

  const ProviderConfig& config() const override { return config_; }

  CallResult Complete(const Request& request, const TextSink& on_text) override {
    std::string body;
    if (std::optional<ModelError> err = EncodeBody(request, &body)) return Fail(*err, 0);
    const std::string url = wire_->Url(config_.base_url);
    const SecretLines secret_headers = wire_->Headers(config_.api_key);
    const std::vector<std::string>& headers = secret_headers.lines();
    const int attempts = config_.max_retries + 1;
    for (int attempt = 1;; ++attempt) {
      if (Cancelled()) return Fail(CancelledError(), attempt - 1);
      if (config_.verbose) LogRequest(url, headers, body, attempt, attempts);
      std::unique_ptr<StreamDecoder> decoder;
      const HttpResult http = Post(url, headers, body, on_text, &decoder);
      // Fail redacts it; an echo of the key there (a hostile server's) never reaches a line.
      const std::string request_id = RequestIdOf(http.headers);
      if (http.cancelled) return Fail(CancelledError(), attempt);
      ModelError err;
      bool retryable = false;
      std::optional<std::chrono::milliseconds> server_wait;
      const bool success_status = http.status >= 200 && http.status < 300;
      if (!http.transport_error.empty() && !http.aborted_by_caller &&
          (http.status == 0 || success_status)) {
        // Connection failure, timeout or a connection dropped mid-reply: the partial reply is
        // discarded and the whole request is retried.
        err.kind = ModelError::Kind::kTransport;
        err.message = http.transport_error + " (" + HttpErrorKindName(http.error_kind) + " error)";
        retryable = true;
      } else if (success_status) {
        Decoded decoded = config_.stream ? decoder->Finish() : wire_->DecodeBody(http.body);
        if (decoded.result.ok()) {
          decoded.result.response.request_id = Redact(request_id);
          return decoded.result;
        }
        err = std::move(*decoded.result.error);
        if (err.kind == ModelError::Kind::kMalformed) {
          err.message += UnexpectedReplyNote(http.headers, config_.stream);
        }
        retryable = decoded.retryable;
      } else {
        err = HttpError(http);
        const std::optional<bool> should = ShouldRetryHeader(http.headers);
        retryable = should.has_value() ? *should : IsRetryableStatus(http.status);
        server_wait = ServerRequestedDelay(http.headers, http.retry_after);
      }
      if (err.request_id.empty()) err.request_id = request_id;
      if (!retryable || attempt >= attempts) return Fail(std::move(err), attempt);

      const std::chrono::milliseconds wait =
          server_wait ? *server_wait : BackoffDelay(attempt - 1, hooks_.jitter());
      if (config_.verbose) {
        Log("forkbox: " + config_.name + " attempt " + std::to_string(attempt) + " failed (" +
            Redact(err.message) + "); retrying in " + std::to_string(wait.count()) + " ms");
      }
      if (hooks_.on_retry) {
        hooks_.on_retry(RetryNotice{success_status ? 0 : static_cast<int>(http.status),
                                    Redact(err.message), static_cast<int64_t>(wait.count()),
                                    server_wait.has_value(), attempt + 1, attempts});
      }
      hooks_.sleep(wait);
    }
  }

 private:
  // The request body; a ModelError (kConfig) when it cannot be encoded.
  std::optional<ModelError> EncodeBody(const Request& request, std::string* body) const {
    try {
      // replace: invalid UTF-8 that slipped past MakeValidUtf8 must not throw here.
      *body = wire_->EncodeRequest(request, config_)
                  .dump(-1, ' ', false, json::error_handler_t::replace);
    } catch (const json::exception& e) {
      ModelError err;
      err.kind = ModelError::Kind::kConfig;
      err.message = std::string("cannot encode the request: ") + e.what();
      return err;
    }
    return std::nullopt;
  }

  // One attempt over HTTP; with streaming, *decoder has consumed the reply.
  HttpResult Post(const std::string& url, const std::vector<std::string>& headers,
                  const std::string& body, const TextSink& on_text,
                  std::unique_ptr<StreamDecoder>* decoder) {
    const auto started = std::chrono::steady_clock::now();
    HttpResult http;
    if (config_.stream) {
      *decoder = wire_->NewStreamDecoder(on_text);
      StreamDecoder* d = decoder->get();
      http =
          http_->Post(url, headers, body, [d](std::string_view chunk) { return d->Feed(chunk); });
    } else {
      http = http_->Post(url, headers, body, nullptr);
    }
    if (config_.verbose) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - started)
                          .count();
      // A server may echo the key in it.
      const std::string request_id = Redact(RequestIdOf(http.headers));
      Log("forkbox: " + config_.name + " reply: HTTP " + std::to_string(http.status) +
          (request_id.empty() ? "" : " request_id " + request_id) + " in " + std::to_string(ms) +
          " ms, " + (http.reused_connection ? "reused connection" : "new connection") +
          (http.transport_error.empty() ? "" : " (" + http.transport_error + ")"));
    }
    return http;
  }

  bool Cancelled() const { return hooks_.cancelled && hooks_.cancelled(); }

  static ModelError CancelledError() {
    ModelError err;
    err.kind = ModelError::Kind::kCancelled;
    err.message = "stopped by the user";
    return err;
  }

  CallResult Fail(ModelError err, int attempts) const {
    err.provider = config_.name;
    err.attempts = attempts;
    err.message = Redact(err.message);
    err.error_type = Redact(err.error_type);
    err.request_id = Redact(err.request_id);
    CallResult result;
    result.error = std::move(err);
    return result;
  }

  // The key, and what is left of it where a quote of a reply was cut (RedactKey).
  std::string Redact(const std::string& s) const { return RedactKey(s, config_.api_key.str()); }

  void Log(const std::string& line) const {
    if (hooks_.log) {
      hooks_.log(line);
    } else {
      std::cerr << line << '\n' << std::flush;
    }
  }

  void LogRequest(const std::string& url, const std::vector<std::string>& headers,
                  const std::string& body, int attempt, int attempts) const {
    std::string out = "forkbox: " + config_.name + " POST " + url + " (attempt " +
                      std::to_string(attempt) + "/" + std::to_string(attempts) + ")";
    const std::vector<std::string> secret = wire_->SecretHeaders();
    for (const std::string& h : headers) {
      const std::string name = Lower(h.substr(0, h.find(':')));
      bool is_secret = false;
      for (const std::string& s : secret) is_secret = is_secret || s == name;
      out += "\n  " + (is_secret ? name + ": [REDACTED]" : h);
    }
    constexpr size_t kMaxLoggedBody = 4000;
    std::string shown = body.substr(0, kMaxLoggedBody);
    MakeValidUtf8(shown);
    out += "\n  body (" + std::to_string(body.size()) + " bytes): " + shown;
    if (body.size() > kMaxLoggedBody) out += "...";
    Log(Redact(out));
  }

  ProviderConfig config_;
  std::unique_ptr<WireFormat> wire_;
  std::unique_ptr<HttpClient> http_;
  ProviderHooks hooks_;
};

}  // namespace

std::string ModelError::ToString() const {
  std::string out = provider.empty() ? "model" : provider;
  out += ": ";
  switch (kind) {
    case Kind::kHttp:
      // Status 0: an error reported inside a 200 reply (an error event or error body).
      out += http_status != 0 ? "HTTP " + std::to_string(http_status) : "error in reply";
      // A server may send any three digits; HTTP defines none past 599.
      if (http_status > 599) out += " (not an HTTP status: outside 100-599)";
      break;
    case Kind::kTransport:
      out += "connection error";
      break;
    case Kind::kMalformed:
      out += "malformed reply";
      break;
    case Kind::kOverloaded:
      out += "overloaded (error in stream)";
      break;
    case Kind::kConfig:
      out += "configuration error";
      break;
    case Kind::kCancelled:
      out += "cancelled";
      break;
    case Kind::kContextOverflow:
      out += "context window exceeded (HTTP " + std::to_string(http_status) + ")";
      break;
  }
  if (!error_type.empty()) out += " " + error_type;
  if (!message.empty()) out += ": " + message;
  if (!request_id.empty()) out += " (request_id " + request_id + ")";
  if (attempts > 0) out += " after " + Plural(attempts, "attempt");
  return out;
}

Result<std::unique_ptr<Provider>> MakeProvider(const ProviderConfig& config_in,
                                               const ProviderHooks& hooks_in) {
  ProviderConfig config = config_in;
  auto fail = [&](const std::string& message) {
    ModelError e;
    e.kind = ModelError::Kind::kConfig;
    e.provider = config.name;
    e.message = message;
    return Status::InvalidArgument(e.ToString());
  };
  if (Status valid = ValidateProviderSettings(config); !valid.ok()) return fail(valid.message());
  const bool anthropic = config.name == "anthropic";
  Result<std::unique_ptr<HttpClient>> http = HttpClient::Create(
      HttpTimeouts{config.connect_timeout_ms, config.idle_timeout_ms, config.total_timeout_ms});
  if (!http.ok()) return fail(http.status().message());
  ProviderHooks hooks = hooks_in;
  const RetryClock real = RetryClock::Real();
  if (!hooks.sleep && hooks.cancelled) {
    hooks.sleep = [cancelled = hooks.cancelled](std::chrono::milliseconds d) {
      SleepUnlessCancelled(d, cancelled);  // The next attempt checks `cancelled` first.
    };
  }
  if (!hooks.sleep) hooks.sleep = real.sleep;
  (*http)->SetCancelCheck(hooks.cancelled);
  (*http)->SetRequestSentHook(hooks.on_request_sent);
  if (!hooks.jitter) hooks.jitter = real.jitter;
  auto wire = anthropic ? MakeAnthropicWire() : MakeOpenAiWire();
  return std::unique_ptr<Provider>(std::make_unique<ProviderImpl>(
      std::move(config), std::move(wire), std::move(*http), std::move(hooks)));
}

}  // namespace forkbox::agent
