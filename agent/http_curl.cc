// The HTTP module (forkbox-http.so): the libcurl side of agent/http_client.h, loaded on first
// use by agent/http_client.cc through the table in agent/http_module.h.
#include <curl/curl.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "agent/http_module.h"

namespace forkbox::agent {

namespace {

// curl_global_init is not thread-safe and must run once per process.
bool GlobalInit(std::string* error) {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (rc != CURLE_OK) {
    *error = std::string("curl_global_init: ") + curl_easy_strerror(rc);
    return false;
  }
  return true;
}

// Frees a header list after zeroing every string in it: the list holds the API key.
struct SlistDeleter {
  void operator()(curl_slist* list) const {
    for (curl_slist* item = list; item != nullptr; item = item->next) {
      if (item->data != nullptr) ::explicit_bzero(item->data, std::strlen(item->data));
    }
    curl_slist_free_all(list);
  }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

// The response headers the model clients read (provider.cc); curl parses them.
constexpr const char* kResponseHeaders[] = {"content-type",   "request-id",     "x-request-id",
                                            "x-should-retry", "retry-after-ms", "retry-after"};

void CollectHeaders(CURL* curl, HttpResult* result) {
  for (const char* name : kResponseHeaders) {
    curl_header* h = nullptr;
    // -1: the last request of the transfer, i.e. the final response (after 100 Continue).
    if (curl_easy_header(curl, name, 0, CURLH_HEADER, -1, &h) == CURLHE_OK && h != nullptr) {
      result->headers[name] = h->value;
    }
  }
  curl_off_t retry_after = 0;
  if (curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0) {
    result->retry_after = std::chrono::seconds(retry_after);
  }
}

struct Transfer {
  CURL* curl = nullptr;
  const HttpClient::BodySink* sink = nullptr;
  const CancelCheck* cancelled = nullptr;
  const std::function<void()>* on_sent = nullptr;
  bool sent_told = false;
  HttpResult* result = nullptr;
  int64_t idle_ms = 0;
  std::chrono::steady_clock::time_point last_byte;
  bool streaming_body = false;  // Decided once the status is known.
  bool status_seen = false;

  // Tells on_sent once: the request is fully written (no Expect: 100-continue, so a response
  // byte also means it was).
  void RequestSent() {
    if (sent_told) return;
    sent_told = true;
    if (on_sent != nullptr && *on_sent) (*on_sent)();
  }

  // Headers are parsed by curl (CollectHeaders); a header byte is activity all the same.
  static size_t OnHeader(char*, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    t->last_byte = std::chrono::steady_clock::now();
    t->RequestSent();
    return size * n;
  }

  static size_t OnBody(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t len = size * n;
    t->last_byte = std::chrono::steady_clock::now();
    if (!t->status_seen) {
      t->status_seen = true;
      long status = 0;
      if (curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK) {
        t->result->status = status;
      }
      t->streaming_body =
          t->sink != nullptr && *t->sink && t->result->status >= 200 && t->result->status < 300;
    }
    if (t->streaming_body) {
      if (!(*t->sink)(std::string_view(data, len))) {
        t->result->aborted_by_caller = true;
        return CURL_WRITEFUNC_ERROR;
      }
      return len;
    }
    // Error bodies are small; cap them anyway so a hostile server cannot exhaust memory.
    constexpr size_t kMaxBody = 256 * 1024 * 1024;
    if (t->result->body.size() + len > kMaxBody) return CURL_WRITEFUNC_ERROR;
    t->result->body.append(data, len);
    return len;
  }

  // Called by curl often (at least once per second) while the transfer runs.
  static int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t ultotal, curl_off_t ulnow) {
    auto* t = static_cast<Transfer*>(user);
    if (ultotal > 0 && ulnow >= ultotal) t->RequestSent();
    if (t->cancelled != nullptr && *t->cancelled && (*t->cancelled)()) {
      t->result->cancelled = true;
      return 1;  // Aborts with CURLE_ABORTED_BY_CALLBACK.
    }
    const auto silent = std::chrono::steady_clock::now() - t->last_byte;
    if (silent > std::chrono::milliseconds(t->idle_ms)) {
      t->result->idle_timeout = true;
      return 1;  // Aborts with CURLE_ABORTED_BY_CALLBACK.
    }
    return 0;
  }
};

void* Create(std::string* error) {
  if (!GlobalInit(error)) return nullptr;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) *error = "curl_easy_init failed";
  return curl;
}

void Destroy(void* handle) { curl_easy_cleanup(static_cast<CURL*>(handle)); }

HttpResult Post(void* handle, const HttpTimeouts& timeouts, const std::string& url,
                const std::vector<std::string>& headers, const std::string& body,
                const HttpClient::BodySink& sink, const CancelCheck& cancelled,
                const std::function<void()>& on_sent) {
  CURL* curl = static_cast<CURL*>(handle);
  HttpResult result;
  Transfer transfer;
  transfer.curl = curl;
  transfer.sink = &sink;
  transfer.cancelled = &cancelled;
  transfer.on_sent = &on_sent;
  transfer.result = &result;
  transfer.idle_ms = timeouts.idle_ms;
  transfer.last_byte = std::chrono::steady_clock::now();

  Slist list;
  for (const std::string& h : headers) {
    curl_slist* next = curl_slist_append(list.get(), h.c_str());
    if (next == nullptr) {
      result.transport_error = "curl_slist_append: out of memory";
      return result;
    }
    (void)list.release();
    list.reset(next);
  }
  // Large bodies must not wait for a 100-continue round trip.
  if (curl_slist* next = curl_slist_append(list.get(), "Expect:")) {
    (void)list.release();
    list.reset(next);
  }

  char errbuf[CURL_ERROR_SIZE] = {};
  CURLcode rc = CURLE_OK;
  auto set = [&](CURLoption option, auto value) {
    if (rc == CURLE_OK) rc = curl_easy_setopt(curl, option, value);
  };
  set(CURLOPT_URL, url.c_str());
  set(CURLOPT_POST, 1L);
  set(CURLOPT_POSTFIELDS, body.data());
  set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  set(CURLOPT_HTTPHEADER, list.get());
  set(CURLOPT_NOSIGNAL, 1L);  // Threads: no SIGALRM-based DNS timeouts.
  set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeouts.connect_ms));
  set(CURLOPT_TIMEOUT_MS, static_cast<long>(timeouts.total_ms));
  set(CURLOPT_TCP_KEEPALIVE, 1L);
  set(CURLOPT_FOLLOWLOCATION, 0L);  // A POST must not silently become a GET elsewhere.
  set(CURLOPT_PROTOCOLS_STR, "http,https");
  set(CURLOPT_HEADERFUNCTION, &Transfer::OnHeader);
  set(CURLOPT_HEADERDATA, &transfer);
  set(CURLOPT_WRITEFUNCTION, &Transfer::OnBody);
  set(CURLOPT_WRITEDATA, &transfer);
  set(CURLOPT_XFERINFOFUNCTION, &Transfer::OnProgress);
  set(CURLOPT_XFERINFODATA, &transfer);
  set(CURLOPT_NOPROGRESS, 0L);
  set(CURLOPT_ERRORBUFFER, errbuf);
  if (rc != CURLE_OK) {
    result.curl_code = rc;
    result.transport_error = std::string("curl_easy_setopt: ") + curl_easy_strerror(rc);
    return result;
  }

  rc = curl_easy_perform(curl);
  long status = 0;
  if (curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status != 0) {
    result.status = status;
  }
  CollectHeaders(curl, &result);
  long connects = 0;
  if (curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK) {
    result.reused_connection = connects == 0 && rc == CURLE_OK;
  }
  if (rc != CURLE_OK) {
    result.curl_code = rc;
    if (result.idle_timeout) {
      result.transport_error =
          "idle timeout: no data from the server for " + std::to_string(timeouts.idle_ms) + " ms";
    } else {
      result.transport_error = curl_easy_strerror(rc);
      if (errbuf[0] != '\0') result.transport_error += std::string(": ") + errbuf;
    }
  }
  // Drop references to this call's buffers so the handle holds nothing dangling.
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, nullptr);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  return result;
}

uint16_t UrlPort(const std::string& url) {
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> u(curl_url(), &curl_url_cleanup);
  if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return 0;
  auto part = [&](CURLUPart what, unsigned flags) -> std::string {
    char* value = nullptr;
    if (curl_url_get(u.get(), what, &value, flags) != CURLUE_OK || value == nullptr) return "";
    std::string out(value);
    curl_free(value);
    return out;
  };
  const std::string scheme = part(CURLUPART_SCHEME, 0);  // Lower-cased by curl.
  if (scheme != "http" && scheme != "https") return 0;
  const std::string port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  const long value = port.empty() ? 0 : std::strtol(port.c_str(), nullptr, 10);
  return value >= 1 && value <= 65535 ? static_cast<uint16_t>(value) : 0;
}

}  // namespace
}  // namespace forkbox::agent

extern "C" __attribute__((visibility("default"))) const forkbox::agent::http_module::Api*
forkbox_http_module() {
  using namespace forkbox::agent;
  static const http_module::Api api{
      http_module::kAbiVersion, &GlobalInit, &Create, &Destroy, &Post, &UrlPort};
  return &api;
}
