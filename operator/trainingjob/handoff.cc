#include "trainingjob/handoff.h"

#include <algorithm>
#include <set>

#include "modeldeployment/spec.h"

namespace mf::op::training {

int64_t NextModelVersion(const Json& model_deployment) {
  int64_t highest = 0;
  const Json& spec = At(model_deployment, "spec");
  const Json& versions = spec.is_object() ? At(spec, "versions") : Json::array();
  if (versions.is_array()) {
    for (const auto& v : versions) {
      if (v.is_object() && v.contains("name") && v["name"].is_string()) {
        highest = std::max(highest, VersionNumber(v["name"].get<std::string>()));
      }
    }
  }
  return highest + 1;
}

StatusOr<Handoff> BuildHandoff(const Json& model_deployment, const TrainingJobSpec& spec, int64_t model_version) {
  Handoff out;
  out.storage_uri = spec.output.model_uri + "/" + std::to_string(model_version);
  const Json& md_spec = At(model_deployment, "spec");
  const Json& versions = md_spec.is_object() ? At(md_spec, "versions") : Json::array();
  if (!versions.is_array() || versions.empty()) {
    return FailedPrecondition("ModelDeployment " + spec.output.deploy_to->model_deployment + " has no spec.versions");
  }
  std::set<std::string> names;
  for (const auto& v : versions) {
    if (!v.is_object()) continue;
    const std::string name = v.contains("name") && v["name"].is_string() ? v["name"].get<std::string>() : "";
    names.insert(name);
    if (v.contains("storageUri") && v["storageUri"] == out.storage_uri) {
      out.already_done = true;
      out.version = name;
    }
  }
  if (out.already_done) return out;
  int64_t number = model_version;
  while (names.count("v" + std::to_string(number))) ++number;
  out.version = "v" + std::to_string(number);

  // The canary's share; the others keep their proportions of the rest (largest remainder).
  const int canary = spec.output.deploy_to->canary_percent;
  std::vector<std::pair<std::string, int>> old;
  int old_total = 0;
  const Json& traffic = At(md_spec, "traffic");
  for (const auto& v : versions) {
    if (!v.is_object() || !v.contains("name") || !v["name"].is_string()) continue;
    const std::string name = v["name"].get<std::string>();
    const int w = traffic.is_object() && traffic.contains(name) && traffic[name].is_number_integer()
                      ? traffic[name].get<int>()
                      : 0;
    old.emplace_back(name, std::clamp(w, 0, 100));
    old_total += std::clamp(w, 0, 100);
  }
  if (old.empty()) {
    return FailedPrecondition("ModelDeployment " + spec.output.deploy_to->model_deployment +
                              " has no named versions in spec.versions");
  }
  Json new_traffic = Json::object();
  const int rest = 100 - canary;
  if (old_total == 0) {
    // Nothing had traffic: the rest goes to the last version before the new one.
    for (const auto& [name, w] : old) new_traffic[name] = 0;
    new_traffic[old.back().first] = rest;
  } else {
    std::vector<std::pair<double, size_t>> remainders;
    int given = 0;
    for (size_t i = 0; i < old.size(); ++i) {
      const double exact = static_cast<double>(old[i].second) * rest / old_total;
      const int floor = static_cast<int>(exact);
      new_traffic[old[i].first] = floor;
      given += floor;
      remainders.emplace_back(exact - floor, i);
    }
    std::stable_sort(remainders.begin(), remainders.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (size_t k = 0; given < rest && k < remainders.size(); ++k, ++given) {
      const std::string& name = old[remainders[k].second].first;
      new_traffic[name] = new_traffic[name].get<int>() + 1;
    }
  }
  new_traffic[out.version] = canary;
  Json new_versions = versions;
  new_versions.push_back({{"name", out.version}, {"storageUri", out.storage_uri}});
  out.patch = {{"metadata", {{"resourceVersion", StringAt(At(model_deployment, "metadata"), "resourceVersion")}}},
               {"spec", {{"versions", new_versions}, {"traffic", new_traffic}}}};
  return out;
}

}  // namespace mf::op::training
