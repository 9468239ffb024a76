// etcd cluster members as the v3 API describes them, and the URL helpers the rest of etcd/
// shares. Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ekco::etcd {

// One member of the cluster (etcdserverpb.Member). An added member that never started has no
// name and no client URLs yet.
struct Member {
  std::uint64_t id = 0;
  std::string name{};
  std::vector<std::string> peer_urls{};    // "https://10.0.0.1:2380"
  std::vector<std::string> client_urls{};  // "https://10.0.0.1:2379"
  bool learner = false;                    // learners do not vote
  bool operator==(const Member&) const = default;
};

// A member ID the way etcdctl prints it: lowercase hex without padding ("8e9e05c52164694d").
// (etcd's JSON gateway carries the same ID as a decimal string.)
std::string formatMemberId(std::uint64_t id);

// "node-b (8e9e05c52164694d)", or "8e9e05c52164694d" for a member without a name, for messages.
std::string describeMember(const Member& member);

// The parts of a URL ekco compares: scheme, host without IPv6 brackets, numeric port (the
// scheme's default when absent: 443 for https, 80 for http).
struct UrlParts {
  std::string scheme{};
  std::string host{};  // "10.0.0.1", "fd00::1" (no brackets), "etcd-a"
  int port = 0;
};
// "https://[fd00::1]:2380/x" → {https, fd00::1, 2380}; nullopt when it is not
// scheme://host[:port].
std::optional<UrlParts> parseUrl(std::string_view url);

// True when both name the same IP address, whatever the spelling ("fd00:0::1" == "FD00::1",
// brackets allowed); strings that are not IP addresses are compared case-insensitively.
bool sameHost(std::string_view a, std::string_view b);

// "https://10.0.0.1:2379", "https://[fd00::1]:2379": the URL of an IP address and port.
std::string urlFor(std::string_view ip, int port, std::string_view scheme = "https");

}  // namespace ekco::etcd
