#include "tools/local/controllers/deployment.h"

#include <algorithm>
#include <cstdint>

namespace mf::local {
namespace {

Json WithoutHashLabel(Json tmpl) {
  if (tmpl.is_object() && tmpl.contains("metadata") && tmpl["metadata"].contains("labels") &&
      tmpl["metadata"]["labels"].is_object()) {
    tmpl["metadata"]["labels"].erase(std::string(kPodTemplateHashLabel));
    if (tmpl["metadata"]["labels"].empty()) tmpl["metadata"].erase("labels");
    if (tmpl["metadata"].empty()) tmpl.erase("metadata");
  }
  return tmpl;
}

int64_t Revision(const Json& rs) {
  std::string text = StringAt(rs, {"metadata", "annotations", kRevisionAnnotation});
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return 0;
    value = value * 10 + (c - '0');
  }
  return value;
}

int64_t SpecReplicas(const Json& rs) { return IntAt(rs, {"spec", "replicas"}, 0); }
int64_t StatusCount(const Json& rs, std::string_view field) {
  return IntAt(rs, {"status", field}, 0);
}

Json BuildReplicaSet(const Json& deployment, const std::string& hash, int64_t replicas,
                     int64_t revision) {
  const Json& spec = ObjectAt(deployment, {"spec"});
  Json tmpl = ObjectAt(spec, {"template"});
  tmpl["metadata"]["labels"][std::string(kPodTemplateHashLabel)] = hash;
  Json selector = spec.contains("selector") ? spec["selector"] : Json::object();
  selector["matchLabels"][std::string(kPodTemplateHashLabel)] = hash;
  Json labels = tmpl["metadata"]["labels"];
  Json rs = {{"apiVersion", "apps/v1"},
             {"kind", "ReplicaSet"},
             {"metadata",
              {{"name", NameOf(deployment) + "-" + hash},
               {"namespace", NamespaceOf(deployment)},
               {"labels", labels},
               {"annotations", {{std::string(kRevisionAnnotation), std::to_string(revision)}}},
               {"ownerReferences",
                Json::array({ControllerRef(deployment, "apps/v1", "Deployment")})}}},
             {"spec",
              {{"replicas", replicas},
               {"minReadySeconds", IntAt(spec, {"minReadySeconds"}, 0)},
               {"selector", selector},
               {"template", tmpl}}}};
  return rs;
}

}  // namespace

std::string PodTemplateHash(const Json& pod_template, int64_t collision_count) {
  uint32_t h = 2166136261u;
  auto mix = [&h](std::string_view bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 16777619u;
    }
  };
  mix(pod_template.dump());  // nlohmann orders object keys: the dump is canonical
  if (collision_count > 0) mix(std::to_string(collision_count));
  static constexpr std::string_view kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  for (char digit : std::to_string(h)) out.push_back(kAlphabet[static_cast<unsigned char>(digit) % kAlphabet.size()]);
  return out;
}

namespace {

StatusOr<DeploymentPlan> PlanDeploymentUnchecked(const Json& deployment,
                                        const std::vector<Json>& replica_sets,
                                        Clock::time_point now) {
  const Json& spec = ObjectAt(deployment, {"spec"});
  const int64_t replicas = IntAt(spec, {"replicas"}, 1);
  if (replicas < 0) return InvalidArgument("spec.replicas must be >= 0");
  Json selector = spec.contains("selector") ? spec["selector"] : Json();
  if (!selector.is_object() || selector.empty()) {
    return InvalidArgument("spec.selector is required and must not be empty");
  }
  MF_ASSIGN_OR_RETURN(bool template_matches,
                      LabelSelectorMatches(selector, LabelsOf(ObjectAt(spec, {"template"}))));
  if (!template_matches) {
    return InvalidArgument("spec.template.metadata.labels do not match spec.selector");
  }
  const std::string strategy = StringAt(spec, {"strategy", "type"}, "RollingUpdate");
  if (strategy != "RollingUpdate" && strategy != "Recreate") {
    return InvalidArgument("spec.strategy.type must be RollingUpdate or Recreate, got '" +
                           strategy + "'");
  }
  const Json& rolling = ObjectAt(spec, {"strategy", "rollingUpdate"});
  int64_t max_surge = 0, max_unavailable = 0;
  if (strategy == "RollingUpdate") {
    MF_ASSIGN_OR_RETURN(max_surge,
                        ResolveIntOrPercent(rolling.value("maxSurge", Json("25%")), replicas,
                                            /*round_up=*/true, "spec.strategy.rollingUpdate.maxSurge"));
    MF_ASSIGN_OR_RETURN(max_unavailable,
                        ResolveIntOrPercent(rolling.value("maxUnavailable", Json("25%")), replicas,
                                            /*round_up=*/false,
                                            "spec.strategy.rollingUpdate.maxUnavailable"));
    if (max_surge == 0 && max_unavailable == 0) max_unavailable = 1;  // as Kubernetes does
    max_unavailable = std::min(max_unavailable, replicas);
  }

  // Split into the ReplicaSet matching the current template and the old ones (oldest first).
  const Json tmpl = ObjectAt(spec, {"template"});
  const Json* new_rs = nullptr;
  std::vector<const Json*> old_rs;
  int64_t max_revision = 0;
  for (const Json& rs : replica_sets) {
    max_revision = std::max(max_revision, Revision(rs));
    if (!new_rs && WithoutHashLabel(ObjectAt(rs, {"spec", "template"})) == WithoutHashLabel(tmpl)) {
      new_rs = &rs;
    } else {
      old_rs.push_back(&rs);
    }
  }
  std::sort(old_rs.begin(), old_rs.end(), [](const Json* a, const Json* b) {
    return std::make_pair(Revision(*a), NameOf(*a)) < std::make_pair(Revision(*b), NameOf(*b));
  });

  DeploymentPlan plan;
  auto sum = [&](auto fn) {
    int64_t total = 0;
    for (const Json& rs : replica_sets) total += fn(rs);
    return total;
  };
  const int64_t all_spec = sum(SpecReplicas);
  int64_t old_spec = 0;
  for (const Json* rs : old_rs) old_spec += SpecReplicas(*rs);
  const bool paused = spec.value("paused", false);
  bool created = false;

  if (!paused && !new_rs) {
    int64_t collision = IntAt(deployment, {"status", "collisionCount"}, 0);
    std::string hash = PodTemplateHash(tmpl, collision);
    int64_t initial = 0;
    if (strategy == "Recreate") {
      initial = old_spec == 0 && sum([](const Json& rs) { return StatusCount(rs, "replicas"); }) == 0
                    ? replicas : 0;
    } else {
      initial = std::clamp(replicas + max_surge - all_spec, int64_t{0}, replicas);
    }
    plan.create_replica_set = BuildReplicaSet(deployment, hash, initial, max_revision + 1);
    created = true;
  } else if (!paused && strategy == "Recreate") {
    // Old pods must be gone before the new ones start.
    bool old_running = false;
    for (const Json* rs : old_rs) {
      if (SpecReplicas(*rs) != 0) plan.scale.emplace_back(NameOf(*rs), 0);
      if (StatusCount(*rs, "replicas") != 0) old_running = true;
    }
    if (!old_running && old_spec == 0 && SpecReplicas(*new_rs) != replicas) {
      plan.scale.emplace_back(NameOf(*new_rs), replicas);
    }
  } else if (!paused) {
    // RollingUpdate: first grow the new ReplicaSet within maxSurge ...
    int64_t new_spec = SpecReplicas(*new_rs);
    int64_t target = new_spec;
    if (new_spec > replicas) {
      target = replicas;
    } else if (new_spec < replicas) {
      int64_t room = replicas + max_surge - all_spec;
      target = new_spec + std::clamp(room, int64_t{0}, replicas - new_spec);
    }
    if (target != new_spec) {
      plan.scale.emplace_back(NameOf(*new_rs), target);
    } else if (old_spec > 0) {
      // ... then shrink old ones without dropping below replicas - maxUnavailable available.
      int64_t min_available = replicas - max_unavailable;
      int64_t new_unavailable = new_spec - StatusCount(*new_rs, "availableReplicas");
      int64_t budget = all_spec - min_available - std::max<int64_t>(new_unavailable, 0);
      std::map<std::string, int64_t> targets;
      for (const Json* rs : old_rs) targets[NameOf(*rs)] = SpecReplicas(*rs);
      // Unhealthy old pods go first: removing them never reduces availability.
      for (const Json* rs : old_rs) {
        if (budget <= 0) break;
        int64_t unhealthy = SpecReplicas(*rs) - StatusCount(*rs, "availableReplicas");
        int64_t cut = std::min(budget, std::max<int64_t>(unhealthy, 0));
        targets[NameOf(*rs)] -= cut;
        budget -= cut;
      }
      int64_t available = sum([](const Json& rs) { return StatusCount(rs, "availableReplicas"); });
      int64_t healthy_budget = std::min(budget, available - min_available);
      for (const Json* rs : old_rs) {
        if (healthy_budget <= 0) break;
        int64_t cut = std::min(healthy_budget, targets[NameOf(*rs)]);
        targets[NameOf(*rs)] -= cut;
        healthy_budget -= cut;
      }
      for (const Json* rs : old_rs) {
        if (targets[NameOf(*rs)] != SpecReplicas(*rs)) {
          plan.scale.emplace_back(NameOf(*rs), targets[NameOf(*rs)]);
        }
      }
    }
  }

  // Old ReplicaSets with nothing left are history; keep revisionHistoryLimit of them.
  int64_t history_limit = IntAt(spec, {"revisionHistoryLimit"}, 10);
  std::vector<const Json*> empty_old;
  for (const Json* rs : old_rs) {
    if (SpecReplicas(*rs) == 0 && StatusCount(*rs, "replicas") == 0) empty_old.push_back(rs);
  }
  for (int64_t i = 0; i + history_limit < static_cast<int64_t>(empty_old.size()); ++i) {
    plan.delete_replica_sets.push_back(NameOf(*empty_old[i]));
  }

  // Status from what the ReplicaSets report now.
  Json status = ObjectAt(deployment, {"status"});
  int64_t actual = sum([](const Json& rs) { return StatusCount(rs, "replicas"); });
  int64_t ready = sum([](const Json& rs) { return StatusCount(rs, "readyReplicas"); });
  int64_t available = sum([](const Json& rs) { return StatusCount(rs, "availableReplicas"); });
  int64_t updated = new_rs ? StatusCount(*new_rs, "replicas") : 0;
  status["observedGeneration"] = IntAt(deployment, {"metadata", "generation"}, 0);
  status["replicas"] = actual;
  status["updatedReplicas"] = updated;
  status["readyReplicas"] = ready;
  status["availableReplicas"] = available;
  status["unavailableReplicas"] = std::max<int64_t>(all_spec - available, 0);
  Json conditions = status.value("conditions", Json::array());
  bool min_available = available >= replicas - max_unavailable;
  SetCondition(conditions, "Available", min_available,
               min_available ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable",
               min_available ? "Deployment has minimum availability."
                             : "Deployment does not have minimum availability.",
               now, /*with_update_time=*/true);
  std::string rs_name = new_rs ? NameOf(*new_rs)
                        : plan.create_replica_set ? NameOf(*plan.create_replica_set) : "";
  bool complete = new_rs && updated == replicas && actual == replicas && available == replicas &&
                  SpecReplicas(*new_rs) == replicas && old_spec == 0;
  if (paused) {
    SetCondition(conditions, "Progressing", false, "DeploymentPaused", "Deployment is paused",
                 now, true);
  } else if (created) {
    SetCondition(conditions, "Progressing", true, "NewReplicaSetCreated",
                 "Created new replica set \"" + rs_name + "\"", now, true);
  } else if (complete) {
    SetCondition(conditions, "Progressing", true, "NewReplicaSetAvailable",
                 "ReplicaSet \"" + rs_name + "\" has successfully progressed.", now, true);
  } else {
    SetCondition(conditions, "Progressing", true, "ReplicaSetUpdated",
                 "ReplicaSet \"" + rs_name + "\" is progressing.", now, true);
  }
  status["conditions"] = std::move(conditions);
  plan.status = std::move(status);
  return plan;
}

}  // namespace

StatusOr<DeploymentPlan> PlanDeployment(const Json& deployment,
                                        const std::vector<Json>& replica_sets,
                                        Clock::time_point now) {
  return CatchMalformed<DeploymentPlan>("Deployment " + NamespaceOf(deployment) + "/" + NameOf(deployment),
                                [&] { return PlanDeploymentUnchecked(deployment, replica_sets, now); });
}

}  // namespace mf::local
