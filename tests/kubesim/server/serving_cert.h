// A serving certificate read from files and read again at a TLS handshake when the files
// changed, as kube-apiserver's dynamic serving certificate does (ServerOptions::serving_cert_file):
// a test renews the pair on disk and the next connection is served the new one.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <mutex>
#include <string>

#include "base/result.h"

namespace ekco::kubesim {

class FileServingCert {
 public:
  // The pair must be readable and match now; kInvalidArgument naming the file otherwise.
  [[nodiscard]] static base::Result<std::unique_ptr<FileServingCert>> open(std::string cert_file,
                                                                           std::string key_file);
  ~FileServingCert();
  FileServingCert(const FileServingCert&) = delete;
  FileServingCert& operator=(const FileServingCert&) = delete;

  // Serves the pair on every connection of `ctx` (which must not outlive this).
  void install(SSL_CTX* ctx);

 private:
  FileServingCert(std::string cert_file, std::string key_file);
  // Re-reads the files when their text changed; a pair caught mid-write (unreadable, or the key
  // not matching) keeps the previous one.
  base::Status refresh();
  static int onHandshake(SSL* ssl, void* self);

  std::string cert_file_;
  std::string key_file_;
  std::mutex mu_;
  std::string cert_text_;
  std::string key_text_;
  X509* cert_ = nullptr;
  EVP_PKEY* key_ = nullptr;
};

}  // namespace ekco::kubesim
