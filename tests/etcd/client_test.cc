// EtcdClient against a scripted transport: JSON parsing, error mapping, endpoint fail-over.
// (cluster_test.cc runs it against a real etcd.)
#include "etcd/client.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <mutex>

#include "tests/fakes/fake_transport.h"

namespace ekco::etcd {
namespace {

using base::Error;
using base::ErrorCode;
using base::Result;

struct Sent {
  std::string base_url{};
  std::string method{};
  std::string target{};
  std::string body{};
};

// Answers per base URL, in order; a base URL without answers is unreachable.
struct Script {
  std::mutex mu{};
  std::map<std::string, std::deque<Result<kube::HttpResponse>>> answers{};
  std::vector<Sent> sent{};
};

// A shared FakeTransport for base_url that answers from the script (what it sent is recorded
// in the script too, in order across endpoints).
std::unique_ptr<kube::HttpTransport> scriptedTransport(const std::string& base_url,
                                                       Script* script) {
  auto transport = std::make_unique<kube::testing::FakeTransport>();
  transport->answer_with =
      [base_url, script](const kube::HttpRequest& request) -> Result<kube::HttpResponse> {
    std::lock_guard lock(script->mu);
    script->sent.push_back({base_url, request.method, request.target, request.body});
    auto& queue = script->answers[base_url];
    if (queue.empty()) {
      return Error("request " + base_url + request.target + ": Connection refused",
                   ErrorCode::kUnavailable);
    }
    auto answer = std::move(queue.front());
    queue.pop_front();
    return answer;
  };
  return transport;
}

kube::HttpResponse answer(int status, std::string body) {
  kube::HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

class ClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<EtcdClient> client(std::vector<std::string> endpoints) {
    ClientOptions options;
    options.endpoints = std::move(endpoints);
    return makeEtcdClient(
        options,
        [this](const std::string& url,
               const ClientOptions&) -> Result<std::unique_ptr<kube::HttpTransport>> {
          if (url.rfind("https://", 0) != 0)
            return Error("bad url " + url, ErrorCode::kInvalidArgument);
          return scriptedTransport(url, &script_);
        });
  }
  void script(const std::string& url, Result<kube::HttpResponse> r) {
    script_.answers[url].push_back(std::move(r));
  }
  Script script_;
};

const char* kList = R"({"header":{"cluster_id":"12042603505508374894","member_id":"1"},
  "members":[
    {"ID":"13144645163086586166","name":"node-a","peerURLs":["https://10.0.0.1:2380"],
     "clientURLs":["https://10.0.0.1:2379"]},
    {"ID":"16436946633432982786","peerURLs":["https://10.0.0.4:2380"],"isLearner":true},
    {"ID":42,"name":"node-c","peerURLs":["https://[fd00::3]:2380"],"clientURLs":["https://[fd00::3]:2379/"]}]})";

TEST_F(ClientTest, ListsMembers) {
  script("https://10.0.0.1:2379", answer(200, kList));
  auto c = client({"https://10.0.0.1:2379/"});
  auto members = c->listMembers();
  ASSERT_TRUE(members) << members.error().message();
  ASSERT_EQ(members->size(), 3u);
  EXPECT_EQ((*members)[0].id, 13144645163086586166ULL);
  EXPECT_EQ((*members)[0].name, "node-a");
  EXPECT_EQ((*members)[0].peer_urls, std::vector<std::string>{"https://10.0.0.1:2380"});
  EXPECT_EQ((*members)[0].client_urls, std::vector<std::string>{"https://10.0.0.1:2379"});
  EXPECT_FALSE((*members)[0].learner);
  EXPECT_EQ((*members)[1].name, "");
  EXPECT_TRUE((*members)[1].client_urls.empty());
  EXPECT_TRUE((*members)[1].learner);
  EXPECT_EQ((*members)[2].id, 42u);
  ASSERT_EQ(script_.sent.size(), 1u);
  EXPECT_EQ(script_.sent[0].method, "POST");
  EXPECT_EQ(script_.sent[0].target, "/v3/cluster/member/list");
  EXPECT_EQ(script_.sent[0].body, "{}");
}

TEST_F(ClientTest, MalformedListIsParseError) {
  script("https://a:2379", answer(200, "<html>oops</html>"));
  script("https://a:2379", answer(200, R"({"members":[{"ID":"12x"}]})"));
  script("https://a:2379", answer(200, R"({"members":[{"ID":"1","peerURLs":"x"}]})"));
  script("https://a:2379", answer(200, R"({"header":{}})"));
  auto c = client({"https://a:2379"});
  auto r = c->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kParse);
  EXPECT_EQ(r.error().message(),
            "list etcd members via https://a:2379: answer is not a JSON object: "
            "\"<html>oops</html>\"");
  r = c->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            "list etcd members via https://a:2379: member: ID: expected a decimal uint64, got "
            "\"12x\"");
  r = c->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            "list etcd members via https://a:2379: member 1: peerURLs: expected an array");
  r = c->listMembers();  // no members at all
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->empty());
}

// Found with tests/fuzz/etcd_fuzz.cc (a 200 KB input): a malformed ID is dumped into the error,
// which recursed once per level and overflowed the stack.
TEST_F(ClientTest, AnAnswerNestedTooDeeplyIsAParseErrorNotACrash) {
  script("https://a:2379", answer(200, R"({"members":[{"ID":)" + std::string(100000, '[') +
                                           std::string(100000, ']') + "}]}"));
  auto c = client({"https://a:2379"});
  auto r = c->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kParse);
  EXPECT_EQ(r.error().message(),
            "list etcd members via https://a:2379: answer is JSON nested deeper than 1000 levels");
}

// Found by etcd_fuzz in the long run (at 199,235 executions): nlohmann's dump() escapes the C0
// controls but not DEL, so a malformed ID carried a raw DEL into the error; a long one was shown
// whole.
TEST_F(ClientTest, AMalformedValueIsShownAsAsciiAndShort) {
  script("https://a:2379", answer(200, R"({"members":[{"ID":"a\u007f\u00e9"}]})"));
  script("https://a:2379", answer(200, R"({"members":[{"ID":"1","peerURLs":[[")" +
                                           std::string(300, 'x') + R"("]]}]})"));
  script("https://a:2379", answer(200, R"({"members":[{"ID":"1","clientURLs":[7]}]})"));
  auto c = client({"https://a:2379"});
  auto r = c->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(
      r.error().message(),
      R"(list etcd members via https://a:2379: member: ID: expected a decimal uint64, got "a\u007f\u00e9")");
  r = c->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            "list etcd members via https://a:2379: member 1: peerURLs: expected strings, got [\"" +
                std::string(198, 'x') + "...");
  r = c->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            "list etcd members via https://a:2379: member 1: clientURLs: expected strings, got 7");
}

TEST_F(ClientTest, RemovesWithDecimalId) {
  script("https://a:2379", answer(200, R"({"header":{},"members":[]})"));
  auto c = client({"https://a:2379"});
  ASSERT_TRUE(c->removeMember(13144645163086586166ULL));
  ASSERT_EQ(script_.sent.size(), 1u);
  EXPECT_EQ(script_.sent[0].target, "/v3/cluster/member/remove");
  EXPECT_EQ(script_.sent[0].body, R"({"ID":"13144645163086586166"})");
}

TEST_F(ClientTest, MapsGatewayErrors) {
  script(
      "https://a:2379",
      answer(
          404,
          R"({"error":"etcdserver: member not found","message":"etcdserver: member not found","code":5})"));
  script(
      "https://a:2379",
      answer(
          503,
          R"({"error":"etcdserver: unhealthy cluster","message":"etcdserver: unhealthy cluster","code":14})"));
  script("https://a:2379", answer(400, R"({"error":"invalid character 'b'\nlooking","code":3})"));
  script("https://a:2379", answer(502, "\x01garbage\n"));
  // Found by tests/fuzz/etcd_fuzz.cc: only line breaks were flattened, so other control
  // characters (terminal escapes) reached the message.
  script("https://a:2379", answer(503,
                                  "{\"message\":\"etcdserver:\\u001b[2J unhealthy\\u007f "
                                  "cluster\\t\",\"code\":14}"));
  auto c = client({"https://a:2379"});
  auto s = c->removeMember(0xb66b2921ec552136ULL);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(s.error().message(),
            "remove etcd member b66b2921ec552136: etcdserver: member not found (HTTP 404, code 5 "
            "from https://a:2379)");
  s = c->removeMember(1);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(s.error().message(),
            "remove etcd member 1: etcdserver: unhealthy cluster (HTTP 503, code 14 from "
            "https://a:2379)");
  s = c->removeMember(2);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.error().message(),
            "remove etcd member 2: invalid character 'b' looking (HTTP 400, code 3 from "
            "https://a:2379)");
  s = c->removeMember(3);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(s.error().message(),
            "remove etcd member 3: \" garbage \" (HTTP 502 from https://a:2379)");
  s = c->removeMember(4);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(s.error().message(),
            "remove etcd member 4: etcdserver: [2J unhealthy  cluster  (HTTP 503, code 14 from "
            "https://a:2379)");
}

TEST_F(ClientTest, ListFallsOverAndRemembersTheEndpointThatAnswered) {
  script("https://b:2379",
         answer(503, R"({"error":"connection closed","message":"connection closed","code":14})"));
  script("https://c:2379", answer(200, kList));
  script("https://c:2379", answer(200, kList));
  auto c = client({"https://a:2379", "https://b:2379", "https://c:2379"});
  auto members = c->listMembers();
  ASSERT_TRUE(members) << members.error().message();
  EXPECT_EQ(members->size(), 3u);
  ASSERT_EQ(script_.sent.size(), 3u);
  EXPECT_EQ(script_.sent[0].base_url, "https://a:2379");
  EXPECT_EQ(script_.sent[1].base_url, "https://b:2379");
  EXPECT_EQ(script_.sent[2].base_url, "https://c:2379");
  // The next call starts with c.
  ASSERT_TRUE(c->listMembers());
  ASSERT_EQ(script_.sent.size(), 4u);
  EXPECT_EQ(script_.sent[3].base_url, "https://c:2379");
}

TEST_F(ClientTest, AllEndpointsDown) {
  auto c = client({"https://a:2379", "https://b:2379"});
  auto r = c->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().message(),
            "list etcd members: no endpoint answered: request "
            "https://a:2379/v3/cluster/member/list: Connection refused; request "
            "https://b:2379/v3/cluster/member/list: Connection refused");
  auto none = client({});
  r = none->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
}

TEST_F(ClientTest, RemoveIsNotResentAfterAnAmbiguousFailure) {
  script("https://a:2379",
         Error("request https://a:2379/v3/cluster/member/remove: timed out", ErrorCode::kTimeout));
  script("https://b:2379", answer(200, "{}"));
  auto c = client({"https://a:2379", "https://b:2379"});
  auto s = c->removeMember(7);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kTimeout);
  EXPECT_EQ(script_.sent.size(), 1u);
  // A refused connection provably sent nothing: the next endpoint gets it.
  script_.sent.clear();
  auto c2 = client({"https://z:2379", "https://b:2379"});
  ASSERT_TRUE(c2->removeMember(7));
  ASSERT_EQ(script_.sent.size(), 2u);
  EXPECT_EQ(script_.sent[1].base_url, "https://b:2379");
  // etcd's verdict from one member is final: no fail-over on "unhealthy cluster".
  script_.sent.clear();
  script("https://y:2379", answer(503, R"({"error":"etcdserver: unhealthy cluster","code":14})"));
  script("https://b:2379", answer(200, "{}"));
  auto c3 = client({"https://y:2379", "https://b:2379"});
  s = c3->removeMember(7);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(script_.sent.size(), 1u);
}

TEST_F(ClientTest, Health) {
  Member m;
  m.id = 1;
  m.client_urls = {"https://a:2379", "https://b:2379/"};
  script("https://b:2379", answer(200, R"({"health":"true"})"));
  auto c = client({"https://a:2379"});
  auto h = c->memberHealthy(m);
  ASSERT_TRUE(h);
  EXPECT_TRUE(*h);
  ASSERT_EQ(script_.sent.size(), 2u);
  EXPECT_EQ(script_.sent[1].method, "GET");
  EXPECT_EQ(script_.sent[1].target, "/health");
  // Unhealthy answers, garbage, refused connections, no client URL: all false.
  script("https://b:2379", answer(503, R"({"health":"false"})"));
  EXPECT_FALSE(*c->memberHealthy(m));
  script("https://b:2379", answer(200, R"({"health":"false"})"));
  EXPECT_FALSE(*c->memberHealthy(m));
  script("https://b:2379", answer(200, "ok"));
  EXPECT_FALSE(*c->memberHealthy(m));
  EXPECT_FALSE(*c->memberHealthy(m));
  m.client_urls = {"unix://x"};
  EXPECT_FALSE(*c->memberHealthy(m));
  m.client_urls.clear();
  EXPECT_FALSE(*c->memberHealthy(m));
}

}  // namespace
}  // namespace ekco::etcd
