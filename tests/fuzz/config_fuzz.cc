// The config loader (agent/config/config.h): /etc/ekco/config.yaml as `ekco agent` and
// `ekco config check` read it, through ConfigLoader::loadYaml and finish().
//
// Checks: every problem and notice is one line (no control character from the input); a config
// that loads without problems renders (renderConfigYaml, `ekco config show`) to YAML that loads
// again without problems and renders to the same bytes (a fixed point: the rendered file means
// what was loaded), and so does its redacted form (`config show`'s output is a valid config).
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/config/config.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using ekco::agent::Config;
using ekco::agent::ConfigLoader;
using ekco::fuzz::check;

std::string problemsOf(const ConfigLoader& loader) {
  std::string out;
  for (const auto& p : loader.problems()) out += p.toString() + "\n";
  return out;
}

// Loads `yaml` (which must be valid) and returns what it renders to.
std::string reload(const std::string& yaml, std::string_view what) {
  ConfigLoader loader;
  loader.loadYaml(yaml, "rendered.yaml");
  const Config cfg = loader.finish();
  check(loader.problems().empty(), std::string(what) + " does not load",
        yaml + "\n---\n" + problemsOf(loader));
  return ekco::agent::renderConfigYaml(cfg);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ConfigLoader loader;
  loader.loadYaml(ekco::fuzz::asText(data, size), "config.yaml");
  const Config cfg = loader.finish();
  for (const auto& p : loader.problems()) ekco::fuzz::checkOneLine(p.toString(), "config problem");
  for (const auto& n : loader.notices()) ekco::fuzz::checkOneLine(n.toString(), "config notice");
  if (!loader.problems().empty()) return 0;

  const std::string rendered = ekco::agent::renderConfigYaml(cfg);
  const std::string again = reload(rendered, "the rendered config");
  check(again == rendered, "the rendered config renders differently when loaded",
        rendered + "\n---\n" + again);

  const std::string shown = ekco::agent::renderConfigYaml(ekco::agent::redactSecrets(cfg));
  (void)reload(shown, "the redacted config (config show)");
  return 0;
}
