#include "runtime/graph/graph.h"

namespace mf::runtime {
namespace {

template <typename T>
StatusOr<T> Get(const std::map<std::string, Attribute>& map, const std::string& name, T dflt, const char* type_name) {
  auto it = map.find(name);
  if (it == map.end()) return dflt;
  if (const T* v = std::get_if<T>(&it->second.value)) return *v;
  return InvalidArgument("attribute '" + name + "' must be of type " + type_name);
}

}  // namespace

StatusOr<int64_t> Attributes::GetInt(const std::string& name, int64_t dflt) const {
  return Get<int64_t>(map_, name, dflt, "INT");
}
StatusOr<float> Attributes::GetFloat(const std::string& name, float dflt) const {
  return Get<float>(map_, name, dflt, "FLOAT");
}
StatusOr<std::string> Attributes::GetString(const std::string& name, std::string dflt) const {
  return Get<std::string>(map_, name, std::move(dflt), "STRING");
}
StatusOr<std::vector<int64_t>> Attributes::GetInts(const std::string& name, std::vector<int64_t> dflt) const {
  return Get<std::vector<int64_t>>(map_, name, std::move(dflt), "INTS");
}
StatusOr<std::vector<float>> Attributes::GetFloats(const std::string& name, std::vector<float> dflt) const {
  return Get<std::vector<float>>(map_, name, std::move(dflt), "FLOATS");
}
StatusOr<std::vector<std::string>> Attributes::GetStrings(const std::string& name,
                                                          std::vector<std::string> dflt) const {
  return Get<std::vector<std::string>>(map_, name, std::move(dflt), "STRINGS");
}
StatusOr<std::shared_ptr<const Tensor>> Attributes::GetTensor(const std::string& name) const {
  return Get<std::shared_ptr<const Tensor>>(map_, name, nullptr, "TENSOR");
}

}  // namespace mf::runtime
