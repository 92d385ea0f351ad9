#include "agent/http_url.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace forkbox::agent {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Digits only, 1-65535.
bool ParsePort(std::string_view text, uint16_t* port) {
  if (text.empty() || text.size() > 5) return false;
  uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value < 1 || value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

// Splits the authority (after any userinfo) into host and port.
Status ParseHostPort(std::string_view authority, ParsedUrl* out) {
  std::string_view port_text;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Status::InvalidArgument("unclosed '[' in the host");
    out->host = Lower(authority.substr(1, close - 1));
    in6_addr addr{};
    if (inet_pton(AF_INET6, out->host.c_str(), &addr) != 1) {
      return Status::InvalidArgument("'" + out->host + "' is not an IPv6 address");
    }
    out->ipv6 = out->ip_literal = true;
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Status::InvalidArgument("junk after the IPv6 address");
      has_port = true;
      port_text = rest.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    out->host = Lower(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      has_port = true;
      port_text = authority.substr(colon + 1);
    }
    in_addr addr{};
    out->ip_literal = inet_pton(AF_INET, out->host.c_str(), &addr) == 1;
  }
  if (out->host.empty()) return Status::InvalidArgument("no host");
  for (unsigned char c : out->host) {
    if (c <= ' ' || c == 0x7f || c == '/' || c == '\\' || c == '@') {
      return Status::InvalidArgument("invalid character in the host");
    }
  }
  if (has_port && !port_text.empty()) {
    if (!ParsePort(port_text, &out->port)) {
      return Status::InvalidArgument("port '" + std::string(port_text) + "' is not 1-65535");
    }
    out->default_port = out->port == (out->tls ? 443 : 80);
  }
  return Status::Ok();
}

}  // namespace

Result<ParsedUrl> ParseHttpUrl(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) return Status::InvalidArgument("no scheme:// in the URL");
  const std::string scheme = Lower(url.substr(0, sep));
  if (scheme != "http" && scheme != "https") {
    return Status::InvalidArgument("scheme '" + scheme + "' is neither http nor https");
  }
  for (unsigned char c : url) {
    if (c <= ' ' || c == 0x7f) return Status::InvalidArgument("a space or control character");
  }
  ParsedUrl out;
  out.tls = scheme == "https";
  out.port = out.tls ? 443 : 80;
  std::string_view rest = url.substr(sep + 3);
  rest = rest.substr(0, rest.find('#'));
  const size_t end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, end);
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    out.has_userinfo = true;
    authority.remove_prefix(at + 1);
  }
  FORKBOX_RETURN_IF_ERROR(ParseHostPort(authority, &out));
  out.target = end == std::string_view::npos ? "/" : std::string(rest.substr(end));
  if (out.target.front() == '?') out.target.insert(0, "/");
  return out;
}

std::string HostPort(const ParsedUrl& url, bool always_port) {
  std::string out = url.ipv6 ? "[" + url.host + "]" : url.host;
  if (always_port || !url.default_port) out += ":" + std::to_string(url.port);
  return out;
}

}  // namespace forkbox::agent
