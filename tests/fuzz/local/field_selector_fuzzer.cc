// libFuzzer entry point for the field selector parser (FieldSelector::Parse), which reads the
// fieldSelector query parameter of lists and watches. A parsed selector is matched against a
// pod-like object (missing paths compare as ""); the empty selector must match everything.
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
  auto selector = mf::local::FieldSelector::Parse(text);
  if (!selector.ok()) {
    Check(!selector.status().message().empty());
    return 0;
  }
  static const nlohmann::json kObjects[] = {
      nlohmann::json::object(),
      nlohmann::json::parse(R"({"metadata":{"name":"web-0","namespace":"ml","labels":{"app":"web"}},
                                "spec":{"nodeName":"node-1","replicas":3,"paused":false,"ports":[80]},
                                "status":{"phase":"Running","podIP":null}})"),
  };
  for (const auto& object : kObjects) {
    const bool matched = selector->Matches(object);
    if (selector->empty()) Check(matched);
  }
  return 0;
}
