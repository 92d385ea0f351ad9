// The model URL as the HTTP client understands it: http or https, a host (a name, an IPv4 literal
// or a bracketed IPv6 literal), a port and a path. Compiled into the agent library (UrlPort, the
// preload's choice of TLS) and into the HTTP module (the requests), so both read a URL alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace forkbox::agent {

struct ParsedUrl {
  bool tls = false;           // https.
  std::string host;           // Without brackets; lower-cased.
  bool ip_literal = false;    // An IPv4 or IPv6 address, not a name (no SNI; checked as an IP).
  bool ipv6 = false;          // Written in brackets.
  uint16_t port = 0;          // Explicit, else 80 or 443.
  bool default_port = true;   // No port in the URL (the Host header then omits it).
  bool has_userinfo = false;  // "user:password@" before the host (the client refuses to send it).
  std::string target;         // Path and query, "/" when empty; never the fragment.
};

// Parses "scheme://[userinfo@]host[:port][/path][?query][#fragment]". The scheme is
// case-insensitive and must be http or https; the port is 1-65535. The error says what is wrong.
Result<ParsedUrl> ParseHttpUrl(std::string_view url);

// "host" or "host:port" (IPv6 in brackets) as the Host header and messages write it.
std::string HostPort(const ParsedUrl& url, bool always_port);

}  // namespace forkbox::agent
