// The HTTP/1.1 request parser on bytes alone: complete, partial, pipelined and malformed input.
#include <gtest/gtest.h>

#include "ai/http.h"

using namespace gizml::ai::http;

namespace {

Parse parse(std::string_view data, Request& out, const Limits& limits = {}) { return parseRequest(data, limits, out); }

int statusOf(std::string_view data, const Limits& limits = {}) {
  Request r;
  const Parse p = parse(data, r, limits);
  return p.kind == Parse::Error ? p.status : p.kind == Parse::Complete ? 200 : 0;
}

}  // namespace

TEST(Http, ParsesARequestWithBody) {
  const std::string data =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: localhost\r\nContent-Type:  application/json \r\n"
      "content-length: 4\r\n\r\nbodyNEXT";
  Request r;
  const Parse p = parse(data, r);
  ASSERT_EQ(p.kind, Parse::Complete) << p.message;
  EXPECT_EQ(p.consumed, data.size() - 4);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/completions?x=1");
  EXPECT_EQ(r.path(), "/v1/completions");
  EXPECT_EQ(*r.header("content-type"), "application/json");
  EXPECT_EQ(r.body, "body");
  EXPECT_TRUE(r.keepAlive);
}

TEST(Http, EveryPrefixIsIncompleteAndNeverAnError) {
  const std::string data = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
  for (size_t n = 0; n < data.size(); ++n) {
    Request r;
    const Parse p = parse(std::string_view(data).substr(0, n), r);
    EXPECT_EQ(p.kind, Parse::Incomplete) << n;
    EXPECT_EQ(p.headersDone, n >= data.size() - 3) << n;
  }
}

TEST(Http, BareLineFeedsAndLeadingEmptyLinesAreAccepted) {
  Request r;
  EXPECT_EQ(parse("\r\nGET / HTTP/1.1\nHost: h\n\n", r).kind, Parse::Complete);
  EXPECT_EQ(r.target, "/");
}

TEST(Http, ConnectionAndVersionDecideKeepAlive) {
  Request r;
  parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n", r);
  EXPECT_FALSE(r.keepAlive);
  parse("GET / HTTP/1.0\r\n\r\n", r);
  EXPECT_FALSE(r.keepAlive);
  EXPECT_EQ(r.minor, 0);
  parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", r);
  EXPECT_TRUE(r.keepAlive);
}

TEST(Http, ExpectContinueIsReportedOnceTheHeadIsRead) {
  Request r;
  const Parse p = parse("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", r);
  EXPECT_EQ(p.kind, Parse::Incomplete);
  EXPECT_TRUE(p.headersDone);
  EXPECT_TRUE(r.expectContinue);
  EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: h\r\nExpect: something\r\n\r\n"), 417);
}

TEST(Http, AbsoluteFormTargetsKeepTheirPath) {
  Request r;
  ASSERT_EQ(parse("GET http://example.com:8080/v1/models HTTP/1.1\r\nHost: h\r\n\r\n", r).kind, Parse::Complete);
  EXPECT_EQ(r.target, "/v1/models");
}

TEST(Http, MalformedInputGetsTheRightStatus) {
  EXPECT_EQ(statusOf("GET  / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("G(T / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("GET nopath HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("GET / HTTP/1.1\rHost: h\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("GET / HTTX/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("GET / HTTP/3.0\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(statusOf("GET / HTTP/1.1\r\nHost h\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("GET / HTTP/1.1\r\nHost : h\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("GET / HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("GET / HTTP/1.1\r\nHost: h\x01\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2, 2\r\n\r\nab"), 200);
  EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2, 3\r\n\r\nab"), 400);
  EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"), 411);
}

TEST(Http, LimitsAreEnforcedBeforeTheDataEnds) {
  Limits small;
  small.requestLine = 16;
  small.headerBytes = 64;
  small.headerCount = 2;
  small.body = 10;
  // No line end yet, but already too long: an answer without waiting for more.
  EXPECT_EQ(statusOf("GET /aaaaaaaaaaaaaaaaaaaaaa", small), 414);
  EXPECT_EQ(statusOf("GET / HTTP/1.1\r\nHost: " + std::string(80, 'h'), small), 431);
  EXPECT_EQ(statusOf("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", small), 431);
  EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n", small), 413);
  EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789", small), 200);
}

TEST(Http, ResponsesAndChunks) {
  const std::string r = response(404, "application/json", "{}", true, {{"Allow", "GET"}});
  EXPECT_EQ(r.substr(0, 24), "HTTP/1.1 404 Not Found\r\n");
  EXPECT_NE(r.find("Content-Length: 2\r\n\r\n{}"), std::string::npos);
  EXPECT_NE(r.find("Allow: GET\r\n"), std::string::npos);
  EXPECT_EQ(chunk(std::string(26, 'z')), "1a\r\n" + std::string(26, 'z') + "\r\n");
  EXPECT_EQ(chunk(""), "");
  EXPECT_EQ(lastChunk(), "0\r\n\r\n");
}
