// libFuzzer entry point for the kubeconfig parser (k8s::ParseKubeconfig) and the base64 decoder
// of its *-data fields. A kubeconfig is a file a user hands us; any bytes must give a config or
// a clear error, never a crash or an exception.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "k8s/config.h"

namespace {

void Check(bool invariant) {
  if (!invariant) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  auto config = mf::k8s::ParseKubeconfig(text, "/nonexistent/kubeconfig-dir");
  if (config.ok()) {
    Check(!config->server.empty());
    Check(!config->ns.empty());
  } else {
    Check(!config.status().message().empty());
  }
  // A context override that names no context must be refused, whatever else the file says.
  auto overridden = mf::k8s::ParseKubeconfig(text, "/nonexistent/kubeconfig-dir", "fuzz-no-such-context");
  Check(!overridden.ok() || text.find("fuzz-no-such-context") != std::string::npos);

  auto decoded = mf::k8s::DecodeBase64(text);
  if (decoded.ok()) Check(decoded->size() <= size / 4 * 3 + 3);
  return 0;
}
