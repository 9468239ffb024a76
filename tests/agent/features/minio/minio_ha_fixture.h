// A kURL MinIO as the minio-ha controller finds it, for its tests: ekco-kubesim (as the ekco
// ServiceAccount with deploy/ and deploy-minio/ RBAC enforced) holding the Deployment `minio`,
// its PVC and Service, the StatefulSet `ha-minio` (desired scale 4), Secret
// `minio-credentials`, an OpenEBS local PV StorageClass, and pods whose IPs and ports point at two
// real S3 servers on loopback (s3rver: the old MinIO and ha-minio, tests/s3/s3rver_fixture.h).
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "s3/client.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/sa_client.h"
#include "tests/s3/s3rver_fixture.h"

namespace ekco::agent::testing {

// What an `ekco agent` of the MinIO tests reads in `dir`: a host root in dir/host (a joined node:
// kubelet.conf, /proc/mounts, a boot id) and dir/config.yaml with MinIO HA on, the other
// self-starting leader controllers off and short election timings.
inline void writeMinioAgentFiles(const std::string& dir, const std::string& reconcile_interval) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(dir) / "host";
  fs::create_directories(root / "etc/kubernetes");
  fs::create_directories(root / "proc/sys/kernel/random");
  std::ofstream(root / "etc/kubernetes/kubelet.conf") << "# joined\n";
  std::ofstream(root / "proc/mounts") << "/dev/sda1 / ext4 rw 0 0\n";
  std::ofstream(root / "proc/sys/kernel/random/boot_id")
      << "0a0a0a0a-0000-4000-8000-00000000000a\n";
  std::ofstream(dir + "/config.yaml") << "leader_election_lease_duration: 3s\n"
                                         "leader_election_renew_deadline: 2s\n"
                                         "leader_election_retry_period: 500ms\n"
                                         "reconcile_interval: "
                                      << reconcile_interval
                                      << "\n"
                                         "enable_ha_minio: true\n"
                                         "minio_namespace: minio\n"
                                         "auto_resource_scaling: false\n"
                                         "rotate_certs: false\n"
                                         "restart_failed_envoy_pods: false\n"
                                         "auto_approve_kubelet_csrs: false\n";
}

inline nlohmann::json minioPod(const std::string& name, const std::string& app, int port) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "minio"}, {"labels", {{"app", app}}}}},
      {"spec",
       {{"nodeName", "node-b"},
        {"containers",
         {{{"name", "minio"}, {"image", "minio/minio"}, {"ports", {{{"containerPort", port}}}}}}}}},
      {"status",
       {{"phase", "Running"},
        {"podIP", "127.0.0.1"},
        {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

inline std::vector<nlohmann::json> minioObjects(int old_port, int ha_port) {
  using nlohmann::json;
  const json labels = {{"app", "minio"}};
  return {
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "minio"}}}},
      {{"apiVersion", "storage.k8s.io/v1"},
       {"kind", "StorageClass"},
       {"metadata", {{"name", "openebs"}}},
       {"provisioner", "openebs.io/local"}},
      {{"apiVersion", "apps/v1"},
       {"kind", "Deployment"},
       {"metadata", {{"name", "minio"}, {"namespace", "minio"}}},
       {"spec",
        {{"replicas", 1},
         {"selector", {{"matchLabels", labels}}},
         {"template",
          {{"metadata", {{"labels", labels}}},
           {"spec", {{"containers", {{{"name", "minio"}, {"image", "minio/minio"}}}}}}}}}}},
      {{"apiVersion", "apps/v1"},
       {"kind", "StatefulSet"},
       {"metadata",
        {{"name", "ha-minio"},
         {"namespace", "minio"},
         {"annotations", {{"kurl.sh/desired-scale", "4"}}}}},
       {"spec",
        {{"replicas", 0},
         {"serviceName", "ha-minio"},
         {"selector", {{"matchLabels", {{"app", "ha-minio"}}}}},
         {"template",
          {{"metadata", {{"labels", {{"app", "ha-minio"}}}}},
           {"spec", {{"containers", {{{"name", "minio"}, {"image", "minio/minio"}}}}}}}}}}},
      {{"apiVersion", "v1"},
       {"kind", "PersistentVolumeClaim"},
       {"metadata", {{"name", "minio-pv-claim"}, {"namespace", "minio"}}},
       {"spec",
        {{"accessModes", {"ReadWriteOnce"}},
         {"resources", {{"requests", {{"storage", "10Gi"}}}}}}}},
      {{"apiVersion", "v1"},
       {"kind", "Service"},
       {"metadata", {{"name", "minio"}, {"namespace", "minio"}}},
       {"spec",
        {{"selector", labels},
         {"ports", {{{"port", 80}, {"targetPort", 9000}, {"protocol", "TCP"}}}}}}},
      {{"apiVersion", "v1"},
       {"kind", "Secret"},
       {"metadata", {{"name", "minio-credentials"}, {"namespace", "minio"}}},
       {"data", {{"MINIO_ACCESS_KEY", "UzNSVkVS"}, {"MINIO_SECRET_KEY", "UzNSVkVS"}}}},
      minioPod("minio-7d9f-x2", "minio", old_port),
      minioPod("ha-minio-0", "ha-minio", ha_port),
  };
}

// The contents the tests migrate: several buckets, empty objects, nested keys, names that need
// URL-encoding, more than one listing page (1,000 keys), and one large object.
class MinioCluster {
 public:
  void start(const std::string& dir, std::size_t large_mib, std::size_t many,
             const base::Clock& clock, std::vector<nlohmann::json> extra = {}) {
    dir_ = dir;
    std::string error;
    old_ = s3::testing::S3rver::start(dir + "/old", &error);
    ASSERT_TRUE(old_) << error;
    ha_ = s3::testing::S3rver::start(dir + "/ha", &error);
    ASSERT_TRUE(ha_) << error;
    std::vector<nlohmann::json> objects = minioObjects(old_->port(), ha_->port());
    objects.insert(objects.end(), extra.begin(), extra.end());
    ASSERT_NO_FATAL_FAILURE(
        cluster_.start(dir, std::move(objects), {"/deploy", "/deploy-minio"}, clock));
    from_ = client(*old_, clock);
    to_ = client(*ha_, clock);
    ASSERT_NO_FATAL_FAILURE(seed(large_mib, many));
  }

  static std::unique_ptr<s3::Client> client(const s3::testing::S3rver& s, const base::Clock& c) {
    return std::make_unique<s3::Client>(
        s3::Endpoint{.host = s.host(),
                     .credentials = {.access_key = s3::testing::kS3rverKey,
                                     .secret_key = s3::testing::kS3rverKey}},
        c);
  }

  // Writes `content` to `bucket/key` on `to` (through a file, as the product does).
  void put(s3::Client& to, const std::string& bucket, const std::string& key,
           const std::string& content) {
    const std::string path = dir_ + "/put";
    std::ofstream(path, std::ios::binary) << content;
    putFile(to, bucket, key, path, content.size());
  }
  void putFile(s3::Client& to, const std::string& bucket, const std::string& key,
               const std::string& path, std::uint64_t size) {
    // The MD5, computed apart from the product's code (OpenSSL's one-shot digest).
    std::string md5;
    {
      std::ifstream in(path, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), {});
      unsigned char d[EVP_MAX_MD_SIZE];
      unsigned int n = 0;
      ASSERT_EQ(EVP_Digest(bytes.data(), bytes.size(), d, &n, EVP_md5(), nullptr), 1);
      for (unsigned int i = 0; i < n; ++i) md5 += fmt::format("{:02x}", d[i]);
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    auto etag = to.upload(bucket, key, fd, size, md5);
    ::close(fd);
    ASSERT_TRUE(etag) << etag.error().message();
  }

  // Writes `content` to `bucket/key` on the old MinIO, or on ha-minio when `on_ha`, as a multipart
  // upload of `parts` parts (botocore); its ETag, "<md5>-<parts>" (not the content's MD5).
  std::string putMultipart(bool on_ha, const std::string& bucket, const std::string& key,
                           const std::string& content, int parts) {
    const std::string path = dir_ + "/put-multipart";
    std::ofstream(path, std::ios::binary) << content;
    return s3::testing::multipartPut(on_ha ? *ha_ : *old_, bucket, key, path, parts);
  }
  // The MD5 of what `c` answers for `bucket/key` now (downloaded), or the error.
  std::string downloadedMd5(s3::Client& c, const std::string& bucket, const std::string& key) {
    const int fd = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    auto got = c.download(bucket, key, fd);
    ::close(fd);
    return got ? got->md5 : "error: " + got.error().message();
  }
  // OpenSSL's one-shot MD5, apart from the product's streaming one.
  static std::string md5(const std::string& bytes) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(bytes.data(), bytes.size(), d, &n, EVP_md5(), nullptr);
    std::string out;
    for (unsigned int i = 0; i < n; ++i) out += fmt::format("{:02x}", d[i]);
    return out;
  }

  // bucket -> key -> etag, as listed.
  std::map<std::string, std::map<std::string, std::string>> contents(s3::Client& c) {
    std::map<std::string, std::map<std::string, std::string>> out;
    auto buckets = c.listBuckets();
    EXPECT_TRUE(buckets) << buckets.error().message();
    if (!buckets) return out;
    for (const std::string& b : *buckets) {
      auto objects = c.listAllObjects(b);
      EXPECT_TRUE(objects) << objects.error().message();
      if (!objects) continue;
      auto& m = out[b];
      for (const s3::ObjectInfo& o : *objects) m[o.key] = o.etag + "/" + std::to_string(o.size);
    }
    return out;
  }

  ServiceAccountCluster& cluster() { return cluster_; }
  kubesim::Server& server() { return cluster_.server(); }
  s3::Client& from() { return *from_; }
  s3::Client& to() { return *to_; }
  const std::vector<std::string>& nestedKeys() const { return keys_; }

 private:
  void seed(std::size_t large_mib, std::size_t many) {
    for (const char* b : {"kotsadm", "registry", "velero"}) ASSERT_TRUE(from_->createBucket(b));
    ASSERT_TRUE(from_->createBucket("empty-bucket"));
    keys_ = {"empty",
             "dir/",
             "dir/nested/deep/deeper/file.json",
             "with space & plus+percent%25=eq?q#hash",
             "ünïcödé/日本語/файл.txt",
             "quote'\"<lt>&amp;",
             "tilde~star*paren(x)!"};
    for (const std::string& k : keys_) {
      ASSERT_NO_FATAL_FAILURE(
          put(*from_, "kotsadm", k, k == "empty" || k == "dir/" ? "" : "object " + k));
    }
    for (std::size_t i = 0; i < many; ++i) {
      ASSERT_NO_FATAL_FAILURE(
          put(*from_, "registry",
              "docker/registry/v2/blobs/" + std::to_string(i % 7) + "/" + std::to_string(i),
              "blob " + std::to_string(i * 7919)));
    }
    if (large_mib > 0) {
      const std::string path = dir_ + "/large";
      {
        std::ofstream out(path, std::ios::binary);
        std::mt19937_64 random(42);
        std::vector<std::uint64_t> block(1 << 14);
        for (std::size_t m = 0; m < large_mib * 8; ++m) {  // 128 KiB blocks
          for (auto& w : block) w = random();
          out.write(reinterpret_cast<const char*>(block.data()),
                    static_cast<std::streamsize>(block.size() * sizeof(std::uint64_t)));
        }
      }
      ASSERT_NO_FATAL_FAILURE(
          putFile(*from_, "velero", "backups/full/large.tar.gz", path, large_mib << 20));
      std::filesystem::remove(path);
    }
  }

  std::string dir_;
  std::unique_ptr<s3::testing::S3rver> old_;
  std::unique_ptr<s3::testing::S3rver> ha_;
  ServiceAccountCluster cluster_;
  std::unique_ptr<s3::Client> from_;
  std::unique_ptr<s3::Client> to_;
  std::vector<std::string> keys_;
};

}  // namespace ekco::agent::testing
