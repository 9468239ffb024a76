#include "kube/token_source.h"

#include <cctype>

namespace ekco::kube {

TokenSource::TokenSource(std::string initial, std::string file, const hostfs::HostFs* fs,
                         const base::Clock& clock, std::chrono::seconds refresh)
    : file_(std::move(file)),
      fs_(fs),
      clock_(clock),
      refresh_(refresh),
      token_(std::move(initial)) {}

std::string TokenSource::current() {
  std::lock_guard lock(mu_);
  if (file_.empty() || fs_ == nullptr) return token_;
  const base::MonoTime now = clock_.monoNow();
  if (read_once_ && now - read_at_ < refresh_) return token_;
  read_once_ = true;
  read_at_ = now;
  if (auto text = fs_->read(file_)) {
    std::string token = std::move(*text);
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
      token.pop_back();
    }
    if (!token.empty()) token_ = std::move(token);
  }
  return token_;
}

}  // namespace ekco::kube
