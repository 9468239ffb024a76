// The floor of an idle agent's RSS on this project's required libraries: a C++ program that
// makes one HTTPS GET through Debian's libcurl (OpenSSL backend), as ekco's Kubernetes client
// does, then waits with one more thread, as a daemon would. bench/run measures its RSS beside the
// idle agents': what an agent on these shared libraries cannot go below, whatever it caches.
//
//   ekco-bench-floor https://127.0.0.1:6443/version [--seconds N]
#include <curl/curl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

size_t discard(char*, size_t size, size_t count, void*) { return size * count; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--seconds")) {
    std::fprintf(stderr, "usage: ekco-bench-floor URL [--seconds N]\n");
    return 2;
  }
  const int seconds = argc == 4 ? std::atoi(argv[3]) : 30;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
  CURL* easy = curl_easy_init();
  if (easy == nullptr) return 1;
  curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "https,http");
  // A throwaway server certificate on loopback: the TLS handshake is what matters here.
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
  const CURLcode code = curl_easy_perform(easy);
  if (code != CURLE_OK) {
    std::fprintf(stderr, "ekco-bench-floor: %s: %s\n", argv[1], curl_easy_strerror(code));
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::thread waiter([seconds] { std::this_thread::sleep_for(std::chrono::seconds(seconds)); });
  waiter.join();
  curl_easy_cleanup(easy);
  curl_global_cleanup();
  return 0;
}
