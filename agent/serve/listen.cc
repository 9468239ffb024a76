#include "agent/serve/listen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

#include <fmt/format.h>

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;

Result<base::UniqueFd> listenTcp(const std::string& ip, int port) {
  if (port < 0 || port > 65535) {
    return Error(fmt::format("port {} is out of range", port), ErrorCode::kInvalidArgument);
  }
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family = AF_INET6;
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof(sockaddr_in6);
  } else if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    family = AF_INET;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof(sockaddr_in);
  } else {
    return Error(fmt::format("\"{}\" is not an IP address", ip), ErrorCode::kInvalidArgument);
  }
  base::UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() && family == AF_INET6 && errno == EAFNOSUPPORT && ip == "::") {
    return listenTcp("0.0.0.0", port);  // a host without IPv6
  }
  if (!fd.valid()) return base::errnoError("socket", errno);
  const int one = 1;
  const int zero = 0;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  const std::string shown =
      family == AF_INET6 ? fmt::format("[{}]:{}", ip, port) : fmt::format("{}:{}", ip, port);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&storage), len) != 0) {
    return base::errnoError("bind " + shown, errno);
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) return base::errnoError("listen " + shown, errno);
  return fd;
}

int boundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

}  // namespace ekco::agent
