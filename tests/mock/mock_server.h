// A real HTTP model server for tests, the demo and the benchmarks (docs/mock.md). It speaks
// Anthropic Messages (POST /v1/messages) and OpenAI Chat Completions (POST
// /v1/chat/completions), streaming and not, validates requests like the real APIs, injects
// faults, and records every request with the times its reply started and finished.
//
//   MockServer server;                       // binds 127.0.0.1 on an ephemeral port
//   server.SetScenario(Scenario::FromJson(j));
//   server.Start();                          // serves on background threads until Stop()/dtor
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/mock/reply.h"
#include "tests/mock/request_view.h"
#include "tests/mock/scenario.h"

namespace forkbox::mock {

struct RecordedRequest {
  uint64_t index = 0;       // 0-based arrival order.
  int64_t received_ns = 0;  // Wall clock (ns since the Unix epoch) when the body was read.
  std::string method;
  std::string path;
  int remote_port = 0;  // The client's port: one value per connection (keep-alive checks).
  std::vector<std::pair<std::string, std::string>> headers;  // As received, unredacted.
  std::string body;
  nlohmann::json json;               // The parsed body; null when it is not JSON.
  std::optional<Format> format;      // nullopt: not a model endpoint.
  RequestView view;                  // Best effort even when the request was rejected.
  std::optional<ApiError> rejected;  // The 4xx the mock answered instead of a reply.

  // Filled while the response goes out.
  int status = 0;
  int rule = -1;        // Scenario rule used, -1 for none / SetHandler.
  std::string outcome;  // "reply", "fault:<kind>", "rejected", "no_rule", "handler_error", ...
  int64_t first_byte_ns = 0;  // Wall clock when the first body byte was written (0: never).
  int64_t last_byte_ns = 0;   // When the last byte was written, or the connection cut/dropped.
  bool complete = false;      // The response is fully sent, cut or dropped.

  std::string Header(std::string_view name) const;  // Case-insensitive; "" when absent.
  bool HasHeader(std::string_view name) const;
  // The record as JSON with credentials redacted (x-api-key, authorization): the --log line.
  nlohmann::json ToJson() const;
};

class MockServer {
 public:
  using Handler = std::function<Reply(const RecordedRequest&)>;
  using Observer = std::function<void(const RecordedRequest&)>;

  // Binds 127.0.0.1:`port` (0: ephemeral) right away; throws std::runtime_error on failure.
  explicit MockServer(int port = 0);
  ~MockServer();  // Stop().
  MockServer(const MockServer&) = delete;
  MockServer& operator=(const MockServer&) = delete;

  // Replaces the rules (and their use counts) and drops any handler.
  void SetScenario(Scenario scenario);
  // Decides every reply from now on; it runs on a server thread, possibly concurrently. An
  // exception from it becomes an HTTP 500 naming the exception.
  void SetHandler(Handler handler);
  // Demand credentials (default true; a scenario's "require_key" overrides it).
  void set_require_key(bool require);
  // Called once per request when its response is complete (sent, cut or dropped).
  void SetObserver(Observer observer);

  void Start();  // Idempotent; throws std::logic_error after Stop().
  void Stop();   // Idempotent; cuts open connections and waits for the server threads.

  int port() const;
  std::string anthropic_base_url() const;  // http://127.0.0.1:PORT
  std::string openai_base_url() const;     // http://127.0.0.1:PORT/v1

  std::vector<RecordedRequest> requests() const;
  RecordedRequest request(size_t index) const;  // Throws std::out_of_range.
  size_t request_count() const;
  void ClearRequests();
  // Block until at least `n` requests arrived / have complete responses; false on timeout.
  bool WaitForRequests(size_t n, std::chrono::milliseconds timeout) const;
  bool WaitForComplete(size_t n, std::chrono::milliseconds timeout) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace forkbox::mock
