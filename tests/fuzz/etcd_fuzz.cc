// etcd's JSON (etcd/client.h, etcd/removal.h): the answers of etcd's v3 JSON gateway as the
// purge reads them. The input's first line is the HTTP status (200 when it is not a number in
// 100..599), the rest the body; every request of the real client (makeEtcdClient over a
// transport that answers with the input) gets that answer: member list, member remove (whose
// non-2xx answers become errors) and /health. The members read are then planned for removal
// (planMemberRemoval) for the node at each peer URL's host, as the purge does.
//
// Checks: errors are one line and name the operation; a removal plan that is safe has a member,
// which is known unhealthy, is not the last voting member and leaves a healthy quorum
// (quorum = voting / 2 + 1); a plan's member is one of the list whose peer URL is the node's IP
// on port 2380; plan reasons are one line; parseUrl of urlFor gives back the parts.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "etcd/client.h"
#include "etcd/member.h"
#include "etcd/removal.h"
#include "kube/transport/http_transport.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using ekco::fuzz::check;
using ekco::fuzz::checkOneLine;

class Answer final : public ekco::kube::HttpTransport {
 public:
  Answer(int status, std::string_view body) : status_(status), body_(body) {}
  ekco::base::Result<ekco::kube::HttpResponse> send(const ekco::kube::HttpRequest&) override {
    return ekco::kube::HttpResponse{.status = status_, .body = std::string(body_)};
  }
  ekco::base::Result<ekco::kube::HttpResponse> stream(const ekco::kube::HttpRequest& request,
                                                      const ekco::kube::ChunkHandler&,
                                                      ekco::kube::CancelToken&) override {
    return send(request);
  }

 private:
  int status_;
  std::string_view body_;
};

void checkPlan(const std::vector<ekco::etcd::Member>& members, const std::string& node_ip,
               const std::map<std::uint64_t, bool>& healthy) {
  const ekco::etcd::RemovalPlan plan = ekco::etcd::planMemberRemoval(members, node_ip, healthy);
  checkOneLine(plan.reason, "removal plan reason");
  check(!plan.safe || plan.member.has_value(), "a safe plan without a member", plan.reason);
  if (plan.member) {
    bool listed = false;
    for (const auto& m : members) listed = listed || m == *plan.member;
    check(listed, "the plan's member is not in the list", plan.reason);
    bool matches = false;
    for (const auto& url : plan.member->peer_urls) {
      auto parts = ekco::etcd::parseUrl(url);
      matches = matches || (parts && parts->port == ekco::etcd::kPeerPort &&
                            ekco::etcd::sameHost(parts->host, node_ip));
    }
    check(matches, "the plan's member has no peer URL at the node's IP", plan.reason);
  }
  if (plan.safe) {
    auto it = healthy.find(plan.member->id);
    check(it != healthy.end() && !it->second, "a safe plan removes a member not known unhealthy",
          plan.reason);
    check(plan.voting_members >= 1, "a safe plan removes the last voting member", plan.reason);
    check(plan.quorum == plan.voting_members / 2 + 1, "wrong quorum", plan.reason);
    check(plan.healthy_remaining >= plan.quorum, "a safe plan leaves no healthy quorum",
          plan.reason);
  }
}

void checkUrl(const std::string& url) {
  auto parts = ekco::etcd::parseUrl(url);
  if (!parts) return;
  check(parts->port >= 1 && parts->port <= 65535, "parseUrl gave a port out of range", url);
  if (parts->host.find_first_of("[]/?#") != std::string::npos) return;  // not an address
  const std::string again = ekco::etcd::urlFor(parts->host, parts->port, parts->scheme);
  auto reparsed = ekco::etcd::parseUrl(again);
  check(reparsed && reparsed->scheme == parts->scheme && reparsed->host == parts->host &&
            reparsed->port == parts->port,
        "parseUrl(urlFor(parts)) differs", url + " -> " + again);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // (Not a structured binding: clang 14 cannot capture one in a lambda.)
  const auto split = ekco::fuzz::firstLine(ekco::fuzz::asText(data, size));
  const std::string_view first = split.first;
  const std::string_view body = split.second;
  int status = 200;
  if (int n = 0; std::from_chars(first.data(), first.data() + first.size(), n).ec == std::errc() &&
                 n >= 100 && n <= 599) {
    status = n;
  }
  ekco::etcd::ClientOptions options;
  options.endpoints = {"https://10.0.0.1:2379", "https://10.0.0.2:2379/"};
  auto client = ekco::etcd::makeEtcdClient(
      options,
      [&](const std::string&, const ekco::etcd::ClientOptions&)
          -> ekco::base::Result<std::unique_ptr<ekco::kube::HttpTransport>> {
        return std::unique_ptr<ekco::kube::HttpTransport>(new Answer(status, body));
      });

  auto removed = client->removeMember(0x2a);
  check(removed.has_value() == (status >= 200 && status <= 299),
        "removeMember's result does not follow the HTTP status", std::to_string(status));
  if (!removed) {
    checkOneLine(removed.error().message(), "removeMember error");
    check(removed.error().message().starts_with("remove etcd member 2a: "),
          "removeMember error does not name the member", removed.error().message());
  }

  auto members = client->listMembers();
  if (!members) {
    checkOneLine(members.error().message(), "listMembers error");
    check(members.error().message().starts_with("list etcd members"),
          "listMembers error does not name the operation", members.error().message());
    return 0;
  }
  check(status >= 200 && status <= 299, "a member list from a non-2xx answer",
        std::to_string(status));

  std::map<std::uint64_t, bool> healthy;
  std::vector<std::string> node_ips = {"10.0.0.1", "fd00::3"};
  for (const auto& m : *members) {
    auto h = client->memberHealthy(m);
    check(h.has_value(), "memberHealthy failed instead of answering false");
    // Half the members (by ID) are down, whatever /health said, so plans can be safe.
    healthy[m.id] = *h && (m.id % 2 == 0);
    for (const auto& url : m.peer_urls) {
      checkUrl(url);
      if (auto parts = ekco::etcd::parseUrl(url); parts && node_ips.size() < 8) {
        node_ips.push_back(parts->host);
      }
    }
    for (const auto& url : m.client_urls) checkUrl(url);
  }
  for (const auto& ip : node_ips) checkPlan(*members, ip, healthy);
  return 0;
}
