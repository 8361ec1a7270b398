#include "modeldeployment/status.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "modeldeployment/desired.h"

namespace mf::op {
namespace {

int64_t IntAt(const Json& obj, std::initializer_list<const char*> path) {
  const Json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) return 0;
    auto it = cur->find(key);
    if (it == cur->end()) return 0;
    cur = &*it;
  }
  return cur->is_number_integer() ? cur->get<int64_t>() : 0;
}

// Safe readers: objects from the API server are trusted in shape only as far as we check.
const Json& Field(const Json& obj, const char* key) {
  static const Json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string Str(const Json& obj, const char* key) {
  const Json& v = Field(obj, key);
  return v.is_string() ? v.get<std::string>() : "";
}

double Round(double v, int digits = 1) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  // The last line says why; earlier lines of a log fallback are context.
  if (auto nl = s.rfind('\n'); nl != std::string::npos) s = s.substr(nl + 1);
  return s.size() > 512 ? s.substr(0, 512) + "..." : s;
}

// A container's last failure: its current or previous terminated state with a non-zero code.
bool FailedTermination(const Json& cs, std::string* message, int64_t* code) {
  for (const char* which : {"state", "lastState"}) {
    const Json& t = Field(Field(cs, which), "terminated");
    const Json& exit_code = Field(t, "exitCode");
    if (!exit_code.is_number_integer() || exit_code.get<int64_t>() == 0) continue;
    *code = exit_code.get<int64_t>();
    *message = Trim(Str(t, "message"));
    if (message->empty()) *message = Str(t, "reason").empty() ? "Error" : Str(t, "reason");
    return true;
  }
  return false;
}

Json Condition(const std::string& type, bool status, const std::string& reason, const std::string& message,
               int64_t generation, const Json& previous, const std::string& now) {
  const std::string value = status ? "True" : "False";
  std::string since = now;
  if (Str(previous, "status") == value && !Str(previous, "lastTransitionTime").empty()) {
    since = Str(previous, "lastTransitionTime");
  }
  return {{"type", type},
          {"status", value},
          {"reason", reason},
          {"message", message},
          {"lastTransitionTime", since},
          {"observedGeneration", generation}};
}

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

PodProblem DiagnosePod(const Json& pod) {
  const Json& status = Field(pod, "status");
  if (const Json& conds = Field(status, "conditions"); conds.is_array()) {
    for (const auto& c : conds) {
      if (Str(c, "type") == "PodScheduled" && Str(c, "status") == "False" && Str(c, "reason") == "Unschedulable") {
        return {"Unschedulable", Str(c, "message").empty() ? "the scheduler cannot place the pod" : Str(c, "message")};
      }
    }
  }
  if (const Json& list = Field(status, "containerStatuses"); list.is_array()) {
    for (const auto& cs : list) {
      std::string message;
      int64_t code = 0;
      const std::string name = Str(cs, "name");
      if (!FailedTermination(cs, &message, &code)) continue;
      if (name == "sync") return {"ModelSyncFailed", message};
      if (name == "server")
        return {"ServerFailed", "the model server exited with code " + std::to_string(code) + ": " + message};
    }
  }
  return {};
}

PodProblem DiagnoseModelStatus(const std::string& body) {
  const Json status = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  const Json& versions = Field(status, "model_version_status");
  if (!versions.is_array()) return {};
  for (const auto& v : versions) {
    const Json& s = Field(v, "status");
    const std::string code = Str(s, "error_code");
    if (Str(v, "state") == "END" && !code.empty() && code != "OK") {
      std::string message = Str(s, "error_message");
      if (message.size() > 512) message = message.substr(0, 512) + "...";
      return {"ModelLoadFailed", "version " + Str(v, "version") + " failed to load: " + code + ": " + message};
    }
  }
  return {};
}

int64_t ServerNotReadySeconds(const Json& pod, int64_t now) {
  const Json& list = Field(Field(pod, "status"), "containerStatuses");
  if (!list.is_array()) return -1;
  for (const auto& cs : list) {
    if (Str(cs, "name") != "server" || Field(cs, "ready") == true) continue;
    const std::string started = Str(Field(Field(cs, "state"), "running"), "startedAt");
    std::tm tm{};
    if (started.empty() || !strptime(started.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return -1;
    return std::max<int64_t>(0, now - static_cast<int64_t>(timegm(&tm)));
  }
  return -1;
}

std::map<std::string, int> EffectiveTraffic(const std::map<std::string, int>& weights,
                                            const std::set<std::string>& ready_versions) {
  int live_total = 0;
  for (const auto& [name, w] : weights) {
    if (ready_versions.count(name)) live_total += w;
  }
  if (live_total == 0) {
    // Nothing ready carries weight: keep the weights (a ready zero-weight version gets no
    // traffic it was not given).
    return weights;
  }
  std::map<std::string, int> out;
  std::vector<std::pair<double, std::string>> remainders;
  int assigned = 0;
  for (const auto& [name, w] : weights) {
    if (!ready_versions.count(name)) {
      out[name] = 0;
      continue;
    }
    const double exact = 100.0 * w / live_total;
    out[name] = static_cast<int>(std::floor(exact));
    assigned += out[name];
    remainders.push_back({exact - std::floor(exact), name});
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; assigned < 100 && i < remainders.size(); ++i, ++assigned) out[remainders[i].second]++;
  return out;
}

std::string TrafficSummary(const ModelDeploymentSpec& md, const std::map<std::string, int>& traffic) {
  std::vector<std::string> parts;
  for (const auto& v : md.versions) {
    auto it = traffic.find(v.name);
    parts.push_back(v.name + "=" + std::to_string(it == traffic.end() ? 0 : it->second));
  }
  return Join(parts, ",");
}

Json FindCondition(const Json& status, const std::string& type) {
  if (!status.is_object()) return nullptr;
  auto it = status.find("conditions");
  if (it == status.end() || !it->is_array()) return nullptr;
  for (const auto& c : *it) {
    if (Str(c, "type") == type) return c;
  }
  return nullptr;
}

Json BuildStatus(const StatusInput& in) {
  const Json& object = *in.object;
  const Json& previous = Field(object, "status");
  const int64_t generation = IntAt(object, {"metadata", "generation"});
  Json status = {{"observedGeneration", generation}};
  auto condition = [&](const std::string& type, bool value, const std::string& reason, const std::string& message) {
    return Condition(type, value, reason, message, generation, FindCondition(previous, type), in.now);
  };

  if (!in.spec) {
    const std::string message = in.spec_error.message();
    status["conditions"] = Json::array({condition("Ready", false, "InvalidSpec", message),
                                        condition("Progressing", false, "InvalidSpec", message),
                                        condition("Degraded", true, "InvalidSpec", message)});
    return status;
  }
  const ModelDeploymentSpec& md = *in.spec;
  const ObservedState& observed = *in.observed;
  status["url"] = "http://" + RouterServiceName(md) + "." + md.ns + ".svc:" + std::to_string(kRestPort);
  status["selector"] = PodSelector(md.name);

  Json versions = Json::array();
  std::set<std::string> ready_versions;
  std::vector<std::string> not_ready, degraded, progressing;
  std::string degraded_reason;
  int64_t ready_total = 0, desired_total = 0;
  double total_qps = 0;
  int64_t scale_replicas = -1;
  for (const auto& v : md.versions) {
    auto chosen = in.replicas.find(v.name);
    const int64_t desired = chosen == in.replicas.end() ? md.ReplicasOf(v) : chosen->second;
    auto it = observed.versions.find(v.name);
    const ObservedVersion empty;
    const ObservedVersion& ov = it == observed.versions.end() ? empty : it->second;
    const Json& d = ov.deployment;
    const int64_t replicas = d.is_object() ? IntAt(d, {"status", "replicas"}) : 0;
    const int64_t ready = d.is_object() ? IntAt(d, {"status", "readyReplicas"}) : 0;
    const int64_t updated = d.is_object() ? IntAt(d, {"status", "updatedReplicas"}) : 0;
    const bool current = d.is_object() &&
                         IntAt(d, {"status", "observedGeneration"}) >= IntAt(d, {"metadata", "generation"}) &&
                         IntAt(d, {"spec", "replicas"}) == desired;
    const bool rolled_out = current && updated >= desired && ready >= desired && replicas == desired;
    if (ready > 0) ready_versions.insert(v.name);
    ready_total += std::min(ready, desired);
    desired_total += desired;
    if (!v.replicas)
      scale_replicas =
          scale_replicas < 0 ? std::min(ready, desired) : std::min(scale_replicas, std::min(ready, desired));

    PodProblem problem;
    for (const auto& pod : ov.pods) {
      problem = DiagnosePod(pod);
      if (!problem.reason.empty()) break;
    }
    if (problem.reason.empty()) problem = ov.model_problem;
    std::string state = ready > 0 ? "AVAILABLE" : "LOADING";
    if (!problem.reason.empty()) {
      if (ready == 0) state = "FAILED";
      degraded.push_back(v.name + ": " + problem.message);
      if (degraded_reason.empty()) degraded_reason = problem.reason;
    }
    if (!rolled_out) {
      not_ready.push_back(v.name + " " + std::to_string(ready) + "/" + std::to_string(desired) + " ready");
      progressing.push_back(v.name);
    }
    Json entry = {{"name", v.name},
                  {"replicas", replicas},
                  {"readyReplicas", ready},
                  {"desiredReplicas", desired},
                  {"modelState", state}};
    if (!problem.reason.empty()) entry["message"] = problem.message;
    if (auto l = in.load.find(v.name); l != in.load.end()) {
      entry["qps"] = Round(l->second.qps);
      entry["errorRate"] = Round(l->second.error_rate, 4);
      entry["latencyP99Ms"] = Round(l->second.latency_p99_ms);
      total_qps += l->second.qps;
    }
    versions.push_back(entry);
  }
  status["versions"] = versions;
  if (!in.load.empty()) status["qps"] = Round(total_qps);
  if (in.rollout.is_object()) {
    status["rollout"] = in.rollout;
    const std::string phase = Str(in.rollout, "phase");
    if (phase == "Progressing") progressing.push_back("canary " + Str(in.rollout, "canary"));
  }
  status["replicas"] = scale_replicas < 0 ? md.replicas : scale_replicas;
  status["readySummary"] = std::to_string(ready_total) + "/" + std::to_string(desired_total);

  const auto traffic = EffectiveTraffic(in.weights, ready_versions);
  Json traffic_json = Json::object();
  for (const auto& [name, pct] : traffic) traffic_json[name] = pct;
  status["traffic"] = traffic_json;
  status["trafficSummary"] = TrafficSummary(md, traffic);

  const Json& router = observed.router_deployment;
  const int64_t router_ready = router.is_object() ? IntAt(router, {"status", "readyReplicas"}) : 0;
  const bool router_current = router.is_object() && IntAt(router, {"status", "observedGeneration"}) >=
                                                        IntAt(router, {"metadata", "generation"});
  // One ready router serves; the rest of a rollout is progress, not unreadiness.
  if (!router_current || router_ready < std::min<int64_t>(1, md.router_replicas)) {
    not_ready.push_back("router " + std::to_string(router_ready) + "/" + std::to_string(md.router_replicas) + " ready");
  }
  if (!router_current || IntAt(router, {"status", "updatedReplicas"}) < md.router_replicas ||
      router_ready < md.router_replicas) {
    progressing.push_back("the router");
  }

  const bool ready = not_ready.empty();
  Json conditions = Json::array();
  conditions.push_back(
      ready ? condition("Ready", true, "AllVersionsReady", "every version has its pods ready and the router is serving")
            : condition("Ready", false, "VersionsNotReady", Join(not_ready, ", ")));
  if (!observed.retiring.empty()) {
    std::vector<std::string> names(observed.retiring.begin(), observed.retiring.end());
    conditions.push_back(
        condition("Progressing", true, "RemovingVersions", "draining traffic, then deleting " + Join(names, ", ")));
  } else if (!progressing.empty()) {
    conditions.push_back(condition("Progressing", true, "RollingOut", "rolling out " + Join(progressing, ", ")));
  } else {
    conditions.push_back(condition("Progressing", false, "Complete", "every version is rolled out"));
  }
  conditions.push_back(degraded.empty() ? condition("Degraded", false, "AsExpected", "")
                                        : condition("Degraded", true, degraded_reason, Join(degraded, "; ")));
  if (in.rollout.is_object()) {
    const bool rolled_back = Str(in.rollout, "phase") == "Aborted";
    conditions.push_back(rolled_back
                             ? condition("RolledBack", true, Str(in.rollout, "abortReason"), Str(in.rollout, "message"))
                             : condition("RolledBack", false, "NotRolledBack", ""));
  }
  status["conditions"] = conditions;
  return status;
}

}  // namespace mf::op
