#include "modeldeployment/cache_view.h"

#include <cstdint>
#include <cstdio>

namespace mf::op {
namespace {

// Copies the listed keys of `from` that exist into a new object.
Json Pick(const Json& from, std::initializer_list<const char*> keys) {
  Json out = Json::object();
  if (!from.is_object()) return out;
  for (const char* k : keys) {
    if (auto it = from.find(k); it != from.end()) out[k] = *it;
  }
  return out;
}

const Json& At(const Json& object, const char* key) {
  static const Json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// A terminated state worth keeping: a non-zero exit (what FailedTermination reads).
Json FailedTerminated(const Json& state) {
  const Json& t = At(state, "terminated");
  const Json& code = At(t, "exitCode");
  if (!code.is_number_integer() || code.get<int64_t>() == 0) return nullptr;
  return Json{{"terminated", Pick(t, {"exitCode", "reason", "message"})}};
}

}  // namespace

void CompactForCache(Json* object) {
  if (!object->is_object()) return;
  if (auto meta = object->find("metadata"); meta != object->end() && meta->is_object()) meta->erase("managedFields");
}

void CompactPodForCache(Json* pod) {
  if (!pod->is_object()) return;
  CompactForCache(pod);
  const Json& status = At(*pod, "status");
  Json compact = Json::object();
  Json conditions = Json::array();
  if (const Json& list = At(status, "conditions"); list.is_array()) {
    for (const auto& c : list) {
      if (At(c, "type") == "PodScheduled") conditions.push_back(Pick(c, {"type", "status", "reason", "message"}));
    }
  }
  if (!conditions.empty()) compact["conditions"] = std::move(conditions);
  Json containers = Json::array();
  if (const Json& list = At(status, "containerStatuses"); list.is_array()) {
    for (const auto& cs : list) {
      Json c = Pick(cs, {"name", "ready", "restartCount"});
      const Json& state = At(cs, "state");
      if (Json t = FailedTerminated(state); !t.is_null()) {
        c["state"] = std::move(t);
      } else if (const Json& running = At(state, "running"); running.is_object()) {
        c["state"] = {{"running", Pick(running, {"startedAt"})}};
      }
      if (Json t = FailedTerminated(At(cs, "lastState")); !t.is_null()) c["lastState"] = std::move(t);
      containers.push_back(std::move(c));
    }
  }
  if (!containers.empty()) compact["containerStatuses"] = std::move(containers);
  if (status.contains("phase")) compact["phase"] = status["phase"];
  pod->erase("spec");
  (*pod)["status"] = std::move(compact);
}

void CompactDeploymentForCache(Json* deployment) {
  if (!deployment->is_object()) return;
  CompactForCache(deployment);
  Json spec = Pick(At(*deployment, "spec"), {"replicas"});
  Json status = Pick(At(*deployment, "status"),
                     {"observedGeneration", "replicas", "readyReplicas", "updatedReplicas", "availableReplicas"});
  (*deployment)["spec"] = std::move(spec);
  (*deployment)["status"] = std::move(status);
}

std::string AppliedHash(const Json& object) {
  Json copy = object;
  if (auto meta = copy.find("metadata"); meta != copy.end() && meta->is_object()) {
    if (auto ann = meta->find("annotations"); ann != meta->end() && ann->is_object()) {
      ann->erase(kAppliedHashAnnotation);
      if (ann->empty()) meta->erase("annotations");
    }
  }
  // FNV-1a over the canonical dump (nlohmann orders object keys): stable across processes.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : copy.dump()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

void StampAppliedHash(Json* object) {
  const std::string hash = AppliedHash(*object);
  (*object)["metadata"]["annotations"][kAppliedHashAnnotation] = hash;
}

}  // namespace mf::op
