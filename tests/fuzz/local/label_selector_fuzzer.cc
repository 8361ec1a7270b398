// libFuzzer entry point for the label selector parser (LabelSelector::Parse), which reads the
// labelSelector query parameter of lists and watches. A parsed selector is matched against a
// few label sets; the empty selector must match everything.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tools/local/store/selector.h"

namespace {

void Check(bool invariant) {
  if (!invariant) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto selector = mf::local::LabelSelector::Parse(text);
  if (!selector.ok()) {
    Check(!selector.status().message().empty());
    return 0;
  }
  static const nlohmann::json kLabelSets[] = {
      nullptr,
      nlohmann::json::object(),
      {{"app", "web"}, {"tier", "frontend"}},
      {{"a", "b"}, {"a.b/c-d_e", "x"}, {"env", ""}},
  };
  for (const auto& labels : kLabelSets) {
    const bool matched = selector->Matches(labels);
    if (selector->empty()) Check(matched);
  }
  return 0;
}
