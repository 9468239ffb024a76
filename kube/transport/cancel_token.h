// Stopping a long-running call (a watch stream) from another thread.
#pragma once

#include <functional>
#include <mutex>

namespace ekco::kube {

// Lets another thread stop a stream. cancel() is sticky and may be called before the stream
// starts, in which case the stream returns at once. The transport registers a waker so a stream
// blocked waiting for data returns promptly instead of at its next poll.
class CancelToken {
 public:
  // The waker runs under the lock, so once setWaker({}) returns no call to the old waker is in
  // progress and the transport may free what it uses.
  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (waker_) waker_();
  }
  bool cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }
  // For transports: the function cancel() calls (cleared with an empty function).
  void setWaker(std::function<void()> waker) {
    std::lock_guard lock(mu_);
    waker_ = std::move(waker);
  }

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::function<void()> waker_;
};

}  // namespace ekco::kube
