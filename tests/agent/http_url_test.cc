// The URL parser shared by UrlPort (the port the sandbox opens) and the HTTP module (where it
// connects, and the request's Host and target).
#include "agent/http_url.h"

#include <gtest/gtest.h>

namespace forkbox::agent {
namespace {

TEST(HttpUrlTest, SchemeHostPortAndTarget) {
  Result<ParsedUrl> u = ParseHttpUrl("HTTPS://API.Example.com/v1/messages?x=1#frag");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "api.example.com");
  EXPECT_FALSE(u->ip_literal);
  EXPECT_EQ(u->port, 443);
  EXPECT_TRUE(u->default_port);
  EXPECT_EQ(u->target, "/v1/messages?x=1");
  EXPECT_EQ(HostPort(*u, false), "api.example.com");

  Result<ParsedUrl> plain = ParseHttpUrl("http://127.0.0.1:8123");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  EXPECT_TRUE(plain->ip_literal);
  EXPECT_EQ(plain->target, "/");
  EXPECT_EQ(HostPort(*plain, false), "127.0.0.1:8123");

  Result<ParsedUrl> query = ParseHttpUrl("http://h?q");
  ASSERT_TRUE(query.ok());
  EXPECT_EQ(query->target, "/?q");
}

TEST(HttpUrlTest, Ipv6LiteralsKeepTheirBracketsInTheHostHeader) {
  Result<ParsedUrl> u = ParseHttpUrl("http://[::1]:7000/v1");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "::1");
  EXPECT_TRUE(u->ipv6);
  EXPECT_TRUE(u->ip_literal);
  EXPECT_EQ(HostPort(*u, false), "[::1]:7000");
  Result<ParsedUrl> d = ParseHttpUrl("https://[::1]:443");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->default_port);
  EXPECT_EQ(HostPort(*d, false), "[::1]");
  EXPECT_EQ(HostPort(*d, true), "[::1]:443");
}

TEST(HttpUrlTest, UserinfoIsFlaggedNotPartOfTheHost) {
  Result<ParsedUrl> u = ParseHttpUrl("http://user:pw@host:9000/x");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->has_userinfo);
  EXPECT_EQ(u->host, "host");
  EXPECT_EQ(u->port, 9000);
}

TEST(HttpUrlTest, BadUrlsSayWhy) {
  EXPECT_NE(ParseHttpUrl("localhost:8080").status().message().find("scheme"), std::string::npos);
  EXPECT_NE(ParseHttpUrl("ftp://h").status().message().find("neither http nor https"),
            std::string::npos);
  EXPECT_NE(ParseHttpUrl("http://h:0").status().message().find("1-65535"), std::string::npos);
  EXPECT_NE(ParseHttpUrl("http://h:65536").status().message().find("1-65535"), std::string::npos);
  EXPECT_FALSE(ParseHttpUrl("http://:80/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://[::1/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://[nope]/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://h/a b").ok());
  EXPECT_FALSE(ParseHttpUrl("http://h/\r\nX: y").ok());
}

}  // namespace
}  // namespace forkbox::agent
