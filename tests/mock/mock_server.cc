#include "tests/mock/mock_server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "tests/mock/connections.h"
#include "tests/mock/prompt_cache.h"
#include "tests/mock/transmission.h"
#include "tests/mock/wire.h"

namespace forkbox::mock {
namespace {

using nlohmann::json;

constexpr size_t kAnthropicMaxBody = 32u << 20;  // The documented 32 MB request limit.
constexpr size_t kThreads = 64;                  // Parallel subagents each hold a connection.

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string Redact(const std::string& name, const std::string& value) {
  if (IEquals(name, "x-api-key") || IEquals(name, "api-key")) {
    return value.empty() ? "" : "[redacted]";
  }
  if (IEquals(name, "authorization")) {
    const size_t space = value.find(' ');
    return space == std::string::npos ? "[redacted]" : value.substr(0, space) + " [redacted]";
  }
  return value;
}

// Credentials and version headers, checked before the body like the real APIs do.
std::optional<ApiError> CheckHeaders(Format format, const RecordedRequest& r, bool require_key) {
  if (format == Format::kAnthropic) {
    if (require_key && r.Header("x-api-key").empty()) {
      return ApiError{401, "authentication_error", "x-api-key header is required", "", ""};
    }
    const std::string version = r.Header("anthropic-version");
    if (version.empty()) {
      return ApiError{400, "invalid_request_error", "anthropic-version: header is required", "",
                      ""};
    }
    if (version != "2023-06-01" && version != "2023-01-01") {
      return ApiError{400, "invalid_request_error",
                      "anthropic-version: invalid version \"" + version + "\"", "", ""};
    }
    return std::nullopt;
  }
  if (!require_key) return std::nullopt;
  const std::string auth = r.Header("authorization");
  if (auth.empty() || auth == "Bearer" || auth == "Bearer ") {
    return ApiError{401, "invalid_request_error",
                    "You didn't provide an API key. You need to provide your API key in an "
                    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                    "", "missing_api_key"};
  }
  if (auth.rfind("Bearer ", 0) != 0) {
    return ApiError{401, "invalid_request_error",
                    "Incorrect API key provided. The Authorization header must be \"Bearer KEY\".",
                    "", "invalid_api_key"};
  }
  return std::nullopt;
}

}  // namespace

std::string RecordedRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return v;
  }
  return "";
}

bool RecordedRequest::HasHeader(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return true;
  }
  return false;
}

nlohmann::json RecordedRequest::ToJson() const {
  nlohmann::json j;
  j["index"] = index;
  j["received_ns"] = received_ns;
  j["method"] = method;
  j["path"] = path;
  j["remote_port"] = remote_port;
  j["format"] = format ? nlohmann::json(FormatName(*format)) : nlohmann::json(nullptr);
  j["bytes"] = body.size();
  j["model"] = view.model;
  j["stream"] = view.stream;
  j["tools"] = view.tool_names;
  j["has_task_tool"] = view.HasTool("task");
  j["turn"] = view.assistant_turns;
  j["status"] = status;
  j["rule"] = rule;
  j["outcome"] = outcome;
  if (rejected) j["error"] = rejected->message;
  j["first_byte_ns"] = first_byte_ns;
  j["last_byte_ns"] = last_byte_ns;
  nlohmann::json h = nlohmann::json::object();
  for (const auto& [k, v] : headers) h[k] = Redact(k, v);
  j["headers"] = h;
  j["body"] = json.is_null() ? nlohmann::json(body) : json;
  return j;
}

// Exposes the listening socket so its backlog can be raised for bursts of parallel clients.
class HttpServer : public httplib::Server {
 public:
  int listen_fd() const { return svr_sock_; }
};

// The worker pool, plus close-on-exec for each connection httplib has just accepted: enqueue
// runs on the accept thread right after accept(), before any request byte is read.
class CloexecPool : public httplib::TaskQueue {
 public:
  CloexecPool(size_t threads, int port) : pool_(threads), port_(port) {}
  void enqueue(std::function<void()> fn) override {
    MarkCloseOnExec(port_);
    pool_.enqueue(std::move(fn));
  }
  void shutdown() override { pool_.shutdown(); }

 private:
  httplib::ThreadPool pool_;
  int port_;
};

struct MockServer::Impl {
  HttpServer server;
  int port = 0;
  std::thread thread;
  std::atomic<bool> started{false};
  std::atomic<bool> listen_returned{false};
  PromptCache cache;  // Its own lock: billing a long prompt must not hold up the request log.

  mutable std::mutex mu;  // Guards everything below.
  mutable std::condition_variable cv;
  bool stopping = false;
  Scenario scenario;
  Handler handler;
  Observer observer;
  bool require_key = true;
  std::vector<RecordedRequest> records;
  uint64_t next_index = 0;
  size_t completed = 0;

  // Sleeps unless Stop() comes first; returns false when stopping.
  bool Pause(int ms) {
    if (ms <= 0) return true;
    std::unique_lock lock(mu);
    return !cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stopping; });
  }

  // The record of request `index`, or null once cleared. Records are appended in index order
  // and only ever cleared all at once, so the position is the index minus the first one.
  RecordedRequest* Find(uint64_t index) {
    if (records.empty() || index < records.front().index) return nullptr;
    const uint64_t at = index - records.front().index;
    return at < records.size() ? &records[at] : nullptr;
  }

  template <typename Fn>
  void Update(uint64_t index, Fn fn) {
    std::lock_guard lock(mu);
    if (RecordedRequest* r = Find(index)) fn(*r);
  }

  void Complete(uint64_t index, const std::string& failure) {
    std::optional<RecordedRequest> done;
    Observer notify;
    {
      std::lock_guard lock(mu);
      if (RecordedRequest* r = Find(index); r != nullptr && !r->complete) {
        r->complete = true;
        if (r->last_byte_ns == 0) r->last_byte_ns = NowNs();
        if (!failure.empty()) r->outcome += (r->outcome.empty() ? "" : "+") + failure;
        done = *r;
        ++completed;
      }
      notify = observer;
    }
    cv.notify_all();
    if (done && notify) notify(*done);
  }

  void Send(const httplib::Request& req, httplib::Response& res, Transmission t, uint64_t index) {
    Update(index, [&](RecordedRequest& r) {
      r.status = t.drop ? 0 : t.status;
      r.outcome = t.outcome;
    });
    if (t.drop) {
      ShutdownConnection(req.local_port, req.remote_port);
      Update(index, [&](RecordedRequest& r) { r.last_byte_ns = NowNs(); });
      Complete(index, "");
      res.status = 500;  // Never reaches the client: the socket is shut down.
      return;
    }
    res.status = t.status;
    for (auto& [k, v] : t.headers) res.set_header(k, v);
    struct State {
      Transmission t;
      size_t next = 0;
    };
    auto state = std::make_shared<State>();
    state->t = std::move(t);
    // Writes the next piece; false aborts the connection (cut, client gone, stopping).
    auto write_next = [this, state, index](httplib::DataSink& sink) {
      State& s = *state;
      if (s.next >= s.t.pieces.size()) return false;
      if (s.next > 0 && !Pause(s.t.piece_delay_ms)) return false;
      if (s.next == 0) Update(index, [](RecordedRequest& r) { r.first_byte_ns = NowNs(); });
      const std::string& piece = s.t.pieces[s.next++];
      if (!sink.write(piece.data(), piece.size())) return false;
      if (s.next == s.t.pieces.size()) {
        Update(index, [](RecordedRequest& r) { r.last_byte_ns = NowNs(); });
        if (s.t.abort_after) return false;
        if (s.t.chunked) sink.done();
      }
      return true;
    };
    auto release = [this, state, index](bool success) {
      const bool cut = state->t.abort_after && state->next == state->t.pieces.size();
      Complete(index, success || cut ? "" : "aborted");
    };
    const std::string content_type = state->t.content_type;
    if (state->t.chunked) {
      res.set_chunked_content_provider(
          content_type, [write_next](size_t, httplib::DataSink& sink) { return write_next(sink); },
          release);
    } else {
      res.set_content_provider(
          state->t.content_length, content_type,
          [write_next](size_t, size_t, httplib::DataSink& sink) { return write_next(sink); },
          release);
    }
  }

  // Answers with `error` instead of a reply, and records why.
  void Reject(const httplib::Request& req, httplib::Response& res, uint64_t index,
              const WireFormat& wire, const ApiError& error, const char* outcome) {
    Update(index, [&](RecordedRequest& r) { r.rejected = error; });
    Transmission t = PlanError(wire, error, wire.RequestId(index + 1));
    t.outcome = outcome;
    Send(req, res, std::move(t), index);
  }

  // Headers, size and body checked like the real APIs. Fills `snapshot` with the record and,
  // once the body is valid, its view.
  std::optional<ApiError> Validate(Format format, const httplib::Request& req, uint64_t index,
                                   RecordedRequest* snapshot) {
    bool need_key;
    {
      std::lock_guard lock(mu);
      if (const RecordedRequest* r = Find(index)) *snapshot = *r;
      need_key = handler ? require_key : scenario.require_key();
    }
    if (auto e = CheckHeaders(format, *snapshot, need_key)) return e;
    if (format == Format::kAnthropic && req.body.size() > kAnthropicMaxBody) {
      return ApiError{413, "request_too_large", "", "", ""};
    }
    RequestView view;
    if (auto e = BuildRequestView(format, req.body, &view)) {
      Update(index, [&](RecordedRequest& r) { r.view = view; });
      return e;
    }
    snapshot->view = view;
    Update(index, [&](RecordedRequest& r) { r.view = view; });
    return std::nullopt;
  }

  // Why a valid request gets no reply: the error to answer and the outcome to record.
  struct Refusal {
    ApiError error;
    const char* outcome;
  };

  // Sets `reply` (and `rule`) from the handler or the scenario's first matching rule.
  std::optional<Refusal> Decide(const RecordedRequest& snapshot, const std::string& body,
                                Reply* reply, int* rule) {
    Handler fn;
    {
      std::lock_guard lock(mu);
      fn = handler;
      if (!fn) {
        if (auto picked = scenario.Pick(snapshot.view, body)) {
          *rule = static_cast<int>(*picked);
          *reply = scenario.rules()[*picked].reply;
        }
      }
    }
    if (fn) {
      try {
        *reply = fn(snapshot);
      } catch (const std::exception& e) {
        return Refusal{ApiError{500, "", std::string("mock: handler threw: ") + e.what(), "", ""},
                       "handler_error"};
      } catch (...) {
        return Refusal{ApiError{500, "", "mock: handler threw a non-std exception", "", ""},
                       "handler_error"};
      }
    } else if (*rule < 0) {
      return Refusal{ApiError{500, "",
                              "mock: no rule matched (first user text: \"" +
                                  snapshot.view.FirstUserText().substr(0, 200) + "\")",
                              "", ""},
                     "no_rule"};
    }
    return std::nullopt;
  }

  // The decided reply resolved (ids, token counts, cache split) and laid out for the wire.
  Transmission PlanDecided(Format format, const RecordedRequest& snapshot, Reply reply,
                           size_t body_bytes, uint64_t seq, const std::string& request_id) {
    const WireFormat& wire = WireFor(format);
    const RequestView& view = snapshot.view;
    // Every valid request feeds the cache; only a computed input total is split by it.
    const CacheSplit split = cache.Bill(format, snapshot.json);
    const bool bill_cache = reply.usage.input_tokens == 0 &&
                            reply.usage.cache_read_input_tokens == 0 &&
                            reply.usage.cache_creation_input_tokens == 0;
    if (view.thinking_budget == 0) reply.thinking.clear();  // The API thinks only when asked.
    Reply resolved = ResolveReply(std::move(reply), wire, seq, body_bytes);
    if (bill_cache) ApplyCacheSplit(split, &resolved.usage);
    WireContext ctx;
    ctx.model = view.model;
    ctx.message_id = wire.MessageId(seq);
    ctx.created = NowNs() / 1'000'000'000;
    ctx.include_usage = view.include_usage;
    return PlanReply(wire, resolved, ctx, view.stream, request_id);
  }

  // The reply decided by the handler or the scenario, or the error that replaces it.
  void Serve(Format format, const httplib::Request& req, httplib::Response& res, uint64_t index) {
    const WireFormat& wire = WireFor(format);
    const uint64_t seq = index + 1;
    const std::string request_id = wire.RequestId(seq);
    RecordedRequest snapshot;
    if (auto e = Validate(format, req, index, &snapshot)) {
      return Reject(req, res, index, wire, *e, "rejected");
    }
    Reply reply;
    int rule = -1;
    if (auto refusal = Decide(snapshot, req.body, &reply, &rule)) {
      return Reject(req, res, index, wire, refusal->error, refusal->outcome);
    }
    Update(index, [&](RecordedRequest& r) { r.rule = rule; });
    if (!Pause(reply.delay_ms)) {
      Update(index, [](RecordedRequest& r) { r.outcome = "stopped"; });
      Complete(index, "");
      res.status = 503;
      return;
    }
    Send(req, res,
         PlanDecided(format, snapshot, std::move(reply), req.body.size(), seq, request_id), index);
  }

  uint64_t Record(const httplib::Request& req, std::optional<Format> format) {
    RecordedRequest r;
    r.received_ns = NowNs();
    r.method = req.method;
    r.path = req.path;
    r.remote_port = req.remote_port;
    for (const auto& [k, v] : req.headers) {
      // cpp-httplib adds these itself; they were not sent by the client.
      if (k == "REMOTE_ADDR" || k == "REMOTE_PORT" || k == "LOCAL_ADDR" || k == "LOCAL_PORT") {
        continue;
      }
      r.headers.emplace_back(k, v);
    }
    r.body = req.body;
    r.json = json::parse(req.body, nullptr, false);
    if (r.json.is_discarded()) r.json = nullptr;
    r.format = format;
    std::lock_guard lock(mu);
    r.index = next_index++;
    records.push_back(std::move(r));
    cv.notify_all();
    return records.back().index;
  }

  // A model endpoint: the request is recorded, then served.
  void ServeModel(Format format, const httplib::Request& req, httplib::Response& res) {
    const uint64_t index = Record(req, format);
    try {
      Serve(format, req, res, index);
    } catch (const std::exception& e) {  // A mock bug must show as a clear 500, not a hang.
      const WireFormat& wire = WireFor(format);
      Transmission t = PlanError(
          wire, ApiError{500, "", std::string("mock: internal error: ") + e.what(), "", ""},
          wire.RequestId(index + 1));
      t.outcome = "internal_error";
      Send(req, res, std::move(t), index);
    }
  }

  // Anything else: recorded, then a 404 shaped like the API the path looks like.
  void NotFound(const httplib::Request& req, httplib::Response& res) {
    const uint64_t index = Record(req, std::nullopt);
    const bool openai = req.path.find("chat") != std::string::npos;
    const WireFormat& wire = WireFor(openai ? Format::kOpenAi : Format::kAnthropic);
    const ApiError error =
        openai ? ApiError{404, "invalid_request_error",
                          "Invalid URL (" + req.method + " " + req.path + ")", "", ""}
               : ApiError{404, "not_found_error", "Not Found", "", ""};
    Reject(req, res, index, wire, error, "not_found");
  }

  void Route() {
    server.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) {
      ServeModel(Format::kAnthropic, req, res);
    });
    server.Post("/v1/chat/completions",
                [this](const httplib::Request& req, httplib::Response& res) {
                  ServeModel(Format::kOpenAi, req, res);
                });
    server.Get("/__requests", [this](const httplib::Request&, httplib::Response& res) {
      json all = json::array();
      {
        std::lock_guard lock(mu);
        for (const auto& r : records) all.push_back(r.ToJson());
      }
      res.set_content(all.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    });
    server.Post("/__reset", [this](const httplib::Request&, httplib::Response& res) {
      {
        std::lock_guard lock(mu);
        records.clear();
        completed = 0;
      }
      res.set_content("{}", "application/json");
    });
    auto not_found = [this](const httplib::Request& req, httplib::Response& res) {
      NotFound(req, res);
    };
    server.Post(".*", not_found);
    server.Get(".*", not_found);
    server.Put(".*", not_found);
    server.Delete(".*", not_found);
  }
};

MockServer::MockServer(int port) : impl_(std::make_unique<Impl>()) {
  HttpServer& s = impl_->server;
  s.set_keep_alive_max_count(100000);
  s.set_keep_alive_timeout(30);
  s.set_tcp_nodelay(true);
  impl_->Route();

  if (port == 0) {
    impl_->port = s.bind_to_any_port("127.0.0.1");
  } else if (s.bind_to_port("127.0.0.1", port)) {
    impl_->port = port;
  } else {
    impl_->port = -1;
  }
  if (impl_->port <= 0) {
    throw std::runtime_error("mock: cannot bind 127.0.0.1:" + std::to_string(port));
  }
  s.new_task_queue = [port = impl_->port] { return new CloexecPool(kThreads, port); };
  MarkCloseOnExec(impl_->port);  // The listener.
  // cpp-httplib listens with a backlog of 5; parallel subagents connect in bursts.
  if (::listen(s.listen_fd(), 1024) != 0) {
    throw std::runtime_error(std::string("mock: listen: ") + std::strerror(errno));
  }
}

MockServer::~MockServer() { Stop(); }

void MockServer::SetScenario(Scenario scenario) {
  std::lock_guard lock(impl_->mu);
  impl_->scenario = std::move(scenario);
  impl_->handler = nullptr;
}

void MockServer::SetHandler(Handler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->handler = std::move(handler);
}

void MockServer::set_require_key(bool require) {
  std::lock_guard lock(impl_->mu);
  impl_->require_key = require;
  impl_->scenario.set_require_key(require);
}

void MockServer::SetObserver(Observer observer) {
  std::lock_guard lock(impl_->mu);
  impl_->observer = std::move(observer);
}

void MockServer::Start() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) throw std::logic_error("mock: Start() after Stop()");
  }
  if (impl_->started.exchange(true)) return;
  impl_->thread = std::thread([impl = impl_.get()] {
    impl->server.listen_after_bind();
    impl->listen_returned = true;
  });
  // stop() is a no-op until the accept loop runs, so wait for it (it starts at once).
  while (!impl_->server.is_running() && !impl_->listen_returned) std::this_thread::yield();
}

void MockServer::Stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  if (!impl_->started) {  // httplib closes the listener only when it ran the accept loop.
    close(impl_->server.listen_fd());
    return;
  }
  impl_->cv.notify_all();
  impl_->server.stop();
  // Idle keep-alive connections would otherwise hold the worker threads until they time out.
  ShutdownAllConnections(impl_->port);
  if (impl_->thread.joinable()) impl_->thread.join();
}

int MockServer::port() const { return impl_->port; }

std::string MockServer::anthropic_base_url() const {
  return "http://127.0.0.1:" + std::to_string(impl_->port);
}

std::string MockServer::openai_base_url() const { return anthropic_base_url() + "/v1"; }

std::vector<RecordedRequest> MockServer::requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->records;
}

RecordedRequest MockServer::request(size_t index) const {
  std::lock_guard lock(impl_->mu);
  return impl_->records.at(index);
}

size_t MockServer::request_count() const {
  std::lock_guard lock(impl_->mu);
  return impl_->records.size();
}

void MockServer::ClearRequests() {
  std::lock_guard lock(impl_->mu);
  impl_->records.clear();
  impl_->completed = 0;
}

bool MockServer::WaitForRequests(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->records.size() >= n; });
}

bool MockServer::WaitForComplete(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->completed >= n; });
}

}  // namespace forkbox::mock
