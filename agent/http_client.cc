#include "agent/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

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

}  // namespace

bool WarmUpHttp(std::string* error) { return GlobalInit(error); }

namespace {

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view TrimWs(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

struct HttpClient::Transfer {
  const BodySink* sink = nullptr;
  const CancelCheck* cancelled = nullptr;
  HttpResult* result = nullptr;
  int64_t idle_ms = 0;
  std::chrono::steady_clock::time_point last_byte;
  bool streaming_body = false;  // Decided once the status is known.
  bool status_seen = false;

  static size_t OnHeader(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t len = size * n;
    t->last_byte = std::chrono::steady_clock::now();
    std::string_view line = TrimWs(std::string_view(data, len));
    if (line.starts_with("HTTP/")) {
      // A new response (after 100 Continue or a redirect): start over.
      t->result->headers.clear();
      const size_t sp = line.find(' ');
      t->result->status =
          sp == std::string_view::npos ? 0 : std::atol(std::string(line.substr(sp + 1, 3)).c_str());
      return len;
    }
    if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
      t->result->headers[Lower(TrimWs(line.substr(0, colon)))] =
          std::string(TrimWs(line.substr(colon + 1)));
    }
    return len;
  }

  static size_t OnBody(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t len = size * n;
    t->last_byte = std::chrono::steady_clock::now();
    if (!t->status_seen) {
      t->status_seen = true;
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
  static int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(user);
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

HttpClient::HttpClient(void* curl, const HttpTimeouts& timeouts)
    : curl_(curl), timeouts_(timeouts) {}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

std::unique_ptr<HttpClient> HttpClient::Create(const HttpTimeouts& timeouts, std::string* error) {
  if (!GlobalInit(error)) return nullptr;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    *error = "curl_easy_init failed";
    return nullptr;
  }
  return std::unique_ptr<HttpClient>(new HttpClient(curl, timeouts));
}

HttpResult HttpClient::Post(const std::string& url, const std::vector<std::string>& headers,
                            const std::string& body, const BodySink& sink) {
  CURL* curl = static_cast<CURL*>(curl_);
  HttpResult result;
  Transfer transfer;
  transfer.sink = &sink;
  transfer.cancelled = &cancelled_;
  transfer.result = &result;
  transfer.idle_ms = timeouts_.idle_ms;
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
  set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeouts_.connect_ms));
  set(CURLOPT_TIMEOUT_MS, static_cast<long>(timeouts_.total_ms));
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
  long connects = 0;
  if (curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK) {
    result.reused_connection = connects == 0 && rc == CURLE_OK;
  }
  if (rc != CURLE_OK) {
    result.curl_code = rc;
    if (result.idle_timeout) {
      result.transport_error =
          "idle timeout: no data from the server for " + std::to_string(timeouts_.idle_ms) + " ms";
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

}  // namespace forkbox::agent
