#include "tests/kubesim/rbac/request_user.h"

namespace ekco::kubesim {
namespace {

thread_local const UserInfo* t_user = nullptr;

}  // namespace

const UserInfo* currentUser() { return t_user; }

std::vector<std::string> authenticatedGroups(const UserInfo& user) {
  std::vector<std::string> groups = user.groups;
  if (!user.inGroup("system:authenticated") && !user.inGroup("system:unauthenticated")) {
    groups.push_back("system:authenticated");
  }
  return groups;
}

ScopedCurrentUser::ScopedCurrentUser(const UserInfo* user) : previous_(t_user) { t_user = user; }

ScopedCurrentUser::~ScopedCurrentUser() { t_user = previous_; }

}  // namespace ekco::kubesim
