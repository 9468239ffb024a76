// What kubesim's API tests share (api_test.cc, api_watch_test.cc): objects, and a fixture that
// starts the server with two nodes and an HTTPS client.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "tests/kubesim/api_tests/test_client.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kubesim::testing {

inline nlohmann::json node(const std::string& name, const std::string& ready) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", nlohmann::json::object()},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", ready}}}}}}};
}

inline nlohmann::json pod(const std::string& ns, const std::string& name,
                          const std::string& node_name,
                          nlohmann::json labels = nlohmann::json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
          {"spec",
           {{"nodeName", node_name}, {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

inline nlohmann::json configMap(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"data", {{"k", "v"}}}};
}

inline std::vector<std::string> names(const nlohmann::json& list) {
  std::vector<std::string> out;
  for (const nlohmann::json& item : list["items"]) out.push_back(item["metadata"]["name"]);
  return out;
}

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kubesim-api-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  void start(ServerOptions options = {}) {
    options.out_dir = dir_.string();
    if (options.clock == nullptr) options.clock = &clock_;
    options.objects.push_back(node("node-a", "True"));
    options.objects.push_back(node("node-b", "Unknown"));
    // The namespaces of a kURL cluster the tests write into (the default ones always exist).
    for (const char* ns : {"kurl", "rook-ceph", "ns"}) {
      options.objects.push_back(
          {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
    }
    auto server = Server::start(std::move(options));
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    client_ = std::make_unique<TestClient>(*server_);
  }

  base::ManualClock clock_;
  std::filesystem::path dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<TestClient> client_;
};

}  // namespace ekco::kubesim::testing
