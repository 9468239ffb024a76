// Eight threads released at once, each giving the free heap back (base::releaseFreeHeap), in a
// process where nothing has done so before: what two informers finishing their first lists
// together do. Exits 0; the bug this guards against aborted the process at thread exit.
#include <atomic>
#include <thread>
#include <vector>

#include "base/os/heap.h"

int main() {
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&go] {
      while (!go.load()) std::this_thread::yield();
      ekco::base::releaseFreeHeap();
    });
  }
  go.store(true);
  for (auto& t : threads) t.join();
  return 0;
}
