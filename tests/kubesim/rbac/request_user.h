// The authenticated caller of the request the current thread serves. kube-apiserver passes the
// user in the request context to admission and registry strategies (a CSR's spec.username, an
// AdmissionReview's userInfo); kubesim serves each connection on its own thread, so the server
// sets it for the scope of a request (server.cc) and the Store's write path reads it.
#pragma once

#include <string>
#include <vector>

#include "tests/kubesim/rbac/rbac.h"

namespace ekco::kubesim {

// The caller, or nullptr outside a request (Server::put, --load, tests calling the Store).
const UserInfo* currentUser();

// The user's groups as kube-apiserver's authenticator hands them on: with system:authenticated
// added for every authenticated user (kubesim's client-certificate users lack it in UserInfo).
std::vector<std::string> authenticatedGroups(const UserInfo& user);

// Sets currentUser() for its scope on this thread.
class ScopedCurrentUser {
 public:
  explicit ScopedCurrentUser(const UserInfo* user);
  ~ScopedCurrentUser();
  ScopedCurrentUser(const ScopedCurrentUser&) = delete;
  ScopedCurrentUser& operator=(const ScopedCurrentUser&) = delete;

 private:
  const UserInfo* previous_;
};

}  // namespace ekco::kubesim
