#include "trainingjob/gang.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace mf::op::training {
namespace {

void AddList(const Json& list, ResourceList* out) {
  if (!list.is_object()) return;
  for (const auto& [name, value] : list.items()) {
    std::optional<double> q;
    if (value.is_string()) q = ParseQuantity(value.get<std::string>());
    if (value.is_number()) q = value.get<double>();
    if (q) (*out)[name] += *q;
  }
}

ResourceList ContainerRequests(const Json& container) {
  ResourceList out;
  if (!container.is_object()) return out;
  const Json& resources = At(container, "resources");
  if (!resources.is_object()) return out;
  AddList(At(resources, "requests"), &out);
  // The API server defaults requests to limits where only limits are given.
  ResourceList limits;
  AddList(At(resources, "limits"), &limits);
  for (const auto& [name, amount] : limits) out.try_emplace(name, amount);
  return out;
}

std::string Amount(const std::string& resource, double value) {
  std::ostringstream s;
  if (resource == "memory" || resource == "ephemeral-storage") {
    s << std::llround(value / (1024.0 * 1024.0)) << "Mi";
  } else if (resource == "cpu") {
    s << std::llround(value * 1000) << "m";
  } else {
    s << value;
  }
  return s.str();
}

bool Matches(const Json& pod_spec, const Json& node_labels) {
  const Json& selector = At(pod_spec, "nodeSelector");
  if (!selector.is_object()) return true;
  for (const auto& [k, v] : selector.items()) {
    if (!node_labels.contains(k) || node_labels[k] != v) return false;
  }
  return true;
}

}  // namespace

std::optional<double> ParseQuantity(const std::string& text) {
  if (text.empty()) return std::nullopt;
  static const std::pair<const char*, double> kSuffixes[] = {{"Ki", 1024.0},
                                                             {"Mi", 1048576.0},
                                                             {"Gi", 1073741824.0},
                                                             {"Ti", 1099511627776.0},
                                                             {"Pi", 1125899906842624.0},
                                                             {"Ei", 1152921504606846976.0},
                                                             {"m", 1e-3},
                                                             {"k", 1e3},
                                                             {"M", 1e6},
                                                             {"G", 1e9},
                                                             {"T", 1e12},
                                                             {"P", 1e15},
                                                             {"E", 1e18}};
  double scale = 1;
  std::string number = text;
  for (const auto& [suffix, factor] : kSuffixes) {
    const std::string s = suffix;
    if (number.size() > s.size() && number.ends_with(s)) {
      number.resize(number.size() - s.size());
      scale = factor;
      break;
    }
  }
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end == number.c_str() || *end != '\0' || !std::isfinite(value * scale) || value < 0) return std::nullopt;
  return value * scale;
}

ResourceList PodRequests(const Json& pod_spec) {
  ResourceList sum;
  const Json& containers = At(pod_spec, "containers");
  if (containers.is_array()) {
    for (const auto& c : containers) {
      for (const auto& [k, v] : ContainerRequests(c)) sum[k] += v;
    }
  }
  const Json& init = At(pod_spec, "initContainers");
  if (init.is_array()) {
    for (const auto& c : init) {
      for (const auto& [k, v] : ContainerRequests(c)) sum[k] = std::max(sum[k], v);
    }
  }
  sum["pods"] += 1;
  return sum;
}

std::vector<NodeRoom> FreeRoom(const std::vector<Json>& nodes, const std::vector<Json>& pods) {
  std::vector<NodeRoom> out;
  for (const Json& node : nodes) {
    const Json& spec = At(node, "spec");
    if (At(spec, "unschedulable") == true) continue;
    const Json& status = At(node, "status");
    bool ready = false;
    const Json& conditions = status.is_object() ? At(status, "conditions") : Json::array();
    for (const auto& c : conditions) {
      if (c.is_object() && StringAt(c, "type") == "Ready" && StringAt(c, "status") == "True") ready = true;
    }
    if (!ready) continue;
    NodeRoom room;
    const Json& meta = At(node, "metadata");
    room.name =
        meta.is_object() && meta.contains("name") && meta["name"].is_string() ? meta["name"].get<std::string>() : "";
    if (meta.is_object() && meta.contains("labels") && meta["labels"].is_object()) room.labels = meta["labels"];
    AddList(status.is_object() ? At(status, "allocatable") : Json::object(), &room.free);
    out.push_back(std::move(room));
  }
  for (const Json& pod : pods) {
    const Json& spec = At(pod, "spec");
    const Json& status = At(pod, "status");
    if (!spec.is_object() || !spec.contains("nodeName") || !spec["nodeName"].is_string()) continue;
    const std::string phase = StringAt(status, "phase");
    if (phase == "Succeeded" || phase == "Failed") continue;
    for (auto& room : out) {
      if (room.name != spec["nodeName"].get<std::string>()) continue;
      for (const auto& [k, v] : PodRequests(spec)) room.free[k] -= v;
    }
  }
  return out;
}

std::string CheckGangFits(std::vector<NodeRoom> nodes, const std::vector<std::pair<std::string, Json>>& pods) {
  if (nodes.empty()) return "no node is Ready and schedulable";
  struct Want {
    std::string name;
    Json spec;
    ResourceList requests;
  };
  std::vector<Want> wants;
  for (const auto& [name, spec] : pods) wants.push_back({name, spec, PodRequests(spec)});
  // Largest first: GPUs, then cpu, then memory.
  std::stable_sort(wants.begin(), wants.end(), [](const Want& a, const Want& b) {
    for (const char* r : {"nvidia.com/gpu", "cpu", "memory"}) {
      const double x = a.requests.count(r) ? a.requests.at(r) : 0, y = b.requests.count(r) ? b.requests.at(r) : 0;
      if (x != y) return x > y;
    }
    return false;
  });
  ResourceList total;
  for (const auto& w : wants) {
    for (const auto& [k, v] : w.requests) total[k] += v;
  }
  for (const auto& w : wants) {
    NodeRoom* chosen = nullptr;
    std::string shortest;  // the resource that was short on the last node tried
    for (auto& room : nodes) {
      if (!Matches(w.spec, room.labels)) continue;
      bool fits = true;
      for (const auto& [k, v] : w.requests) {
        if (v <= 0) continue;
        const double free = room.free.count(k) ? room.free[k] : 0;
        if (free + 1e-9 < v) {
          fits = false;
          shortest = k;
          break;
        }
      }
      if (fits) {
        chosen = &room;
        break;
      }
    }
    if (!chosen) {
      std::string free_text;
      if (!shortest.empty()) {
        double free = 0;
        for (const auto& room : nodes) free += std::max(0.0, room.free.count(shortest) ? room.free.at(shortest) : 0.0);
        free_text = "; the job's " + std::to_string(wants.size()) + " pods ask for " +
                    Amount(shortest, total[shortest]) + " " + shortest + " in all, and " + Amount(shortest, free) +
                    " is free on the nodes";
      }
      return "pod " + w.name + " does not fit on any node" +
             (shortest.empty() ? " (no node matches its nodeSelector)" : " (not enough " + shortest + ")") + free_text;
    }
    for (const auto& [k, v] : w.requests) chosen->free[k] -= v;
  }
  return "";
}

}  // namespace mf::op::training
