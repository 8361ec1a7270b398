#include "modeldeployment/cache_view.h"

#include <cstdint>
#include <cstdio>
#include <string_view>

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

bool OurKey(std::string_view key) { return key.starts_with("modelfleet.io/") || key.starts_with("app.kubernetes.io/"); }

Json OursOnly(const Json& map) {
  Json out = Json::object();
  if (!map.is_object()) return out;
  for (const auto& [k, v] : map.items()) {
    if (OurKey(k)) out[k] = v;
  }
  return out;
}

// What the reconcile reads of any object's metadata: identity, our labels and annotations, the
// controller reference (IsControlledBy), deletion.
Json CompactMetadata(const Json& meta) {
  Json out = Pick(meta, {"name", "namespace", "uid", "resourceVersion", "generation", "deletionTimestamp"});
  if (Json labels = OursOnly(At(meta, "labels")); !labels.empty()) out["labels"] = std::move(labels);
  if (Json annotations = OursOnly(At(meta, "annotations")); !annotations.empty())
    out["annotations"] = std::move(annotations);
  if (const Json& refs = At(meta, "ownerReferences"); refs.is_array()) {
    Json kept = Json::array();
    for (const auto& ref : refs) {
      if (At(ref, "controller") == true) kept.push_back(Pick(ref, {"kind", "name", "uid", "controller"}));
    }
    if (!kept.empty()) out["ownerReferences"] = std::move(kept);
  }
  return out;
}

std::string HexHash(std::string_view bytes) {
  // FNV-1a 64: stable across processes and builds (nlohmann's dump orders object keys).
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace

void CompactForCache(Json* object) {
  if (!object->is_object()) return;
  if (auto meta = object->find("metadata"); meta != object->end() && meta->is_object()) meta->erase("managedFields");
}

void CompactOwnedForCache(Json* object) {
  if (!object->is_object()) return;
  Json compact = Json::object();
  compact["metadata"] = CompactMetadata(At(*object, "metadata"));
  compact[kCachedDigestKey] = LiveDigest(*object);
  if (At(*object, "kind") == "Deployment" || At(At(*object, "spec"), "template").is_object()) {
    compact["spec"] = Pick(At(*object, "spec"), {"replicas"});
    compact["status"] = Pick(At(*object, "status"), {"observedGeneration", "replicas", "readyReplicas",
                                                     "updatedReplicas", "availableReplicas"});
  }
  *object = std::move(compact);
}

void CompactPodForCache(Json* pod) {
  if (!pod->is_object()) return;
  const Json& status = At(*pod, "status");
  Json compact_status = Json::object();
  Json conditions = Json::array();
  if (const Json& list = At(status, "conditions"); list.is_array()) {
    for (const auto& c : list) {
      if (At(c, "type") == "PodScheduled") conditions.push_back(Pick(c, {"type", "status", "reason", "message"}));
    }
  }
  if (!conditions.empty()) compact_status["conditions"] = std::move(conditions);
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
  if (!containers.empty()) compact_status["containerStatuses"] = std::move(containers);
  if (status.contains("phase")) compact_status["phase"] = status["phase"];
  Json compact = Json::object();
  compact["metadata"] = CompactMetadata(At(*pod, "metadata"));
  compact["status"] = std::move(compact_status);
  *pod = std::move(compact);
}

std::string AppliedHash(const Json& object) {
  Json copy = object;
  if (auto meta = copy.find("metadata"); meta != copy.end() && meta->is_object()) {
    if (auto ann = meta->find("annotations"); ann != meta->end() && ann->is_object()) {
      ann->erase(kAppliedHashAnnotation);
      if (ann->empty()) meta->erase("annotations");
    }
  }
  return HexHash(copy.dump());
}

void StampAppliedHash(Json* object) {
  const std::string hash = AppliedHash(*object);
  (*object)["metadata"]["annotations"][kAppliedHashAnnotation] = hash;
}

std::string LiveDigest(const Json& object) {
  if (!object.is_object()) return HexHash(object.dump());
  Json content = Json::object();
  for (const auto& [k, v] : object.items()) {
    if (k != "metadata" && k != "status" && k != "apiVersion" && k != "kind") content[k] = v;
  }
  return HexHash(content.dump());
}

std::string CachedDigest(const Json& object) {
  const Json& d = At(object, kCachedDigestKey);
  return d.is_string() ? d.get<std::string>() : "";
}

}  // namespace mf::op
