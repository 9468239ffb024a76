// The kURL mapping (agent/config/kurl_installer.h): a kURL Installer spec as
// `ekco config from-kurl` reads it.
//
// Checks: every problem and notice is one line (no control character from the input); a spec
// that converts without problems gives a config whose rendering (what `config from-kurl`
// writes) loads without problems and renders to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/config/config.h"
#include "agent/config/kurl_installer.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ekco::fuzz::check;
  const ekco::agent::KurlConversion c =
      ekco::agent::configFromKurlInstaller(ekco::fuzz::asText(data, size), "installer.yaml");
  for (const auto& p : c.problems) ekco::fuzz::checkOneLine(p.toString(), "kURL problem");
  for (const auto& n : c.notices) ekco::fuzz::checkOneLine(n.toString(), "kURL notice");
  if (!c.problems.empty()) return 0;

  const std::string rendered = ekco::agent::renderConfigYaml(c.config);
  ekco::agent::ConfigLoader loader;
  loader.loadYaml(rendered, "config.yaml");
  const ekco::agent::Config cfg = loader.finish();
  std::string problems;
  for (const auto& p : loader.problems()) problems += p.toString() + "\n";
  check(problems.empty(), "the converted config does not load", rendered + "\n---\n" + problems);
  const std::string again = ekco::agent::renderConfigYaml(cfg);
  check(again == rendered, "the converted config renders differently when loaded",
        rendered + "\n---\n" + again);
  return 0;
}
