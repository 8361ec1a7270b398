#include "trainingjob/status.h"

#include <ctime>

#include "trainingjob/desired.h"

namespace mf::op::training {

Json FindCondition(const Json& status, const std::string& type) {
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) return nullptr;
  for (const auto& c : status["conditions"]) {
    if (c.is_object() && c.contains("type") && c["type"] == type) return c;
  }
  return nullptr;
}

bool IsConditionTrue(const Json& status, const std::string& type) {
  const Json c = FindCondition(status, type);
  return c.is_object() && c.contains("status") && c["status"] == "True";
}

bool SetCondition(Json* status, const std::string& type, bool value, const std::string& reason,
                  const std::string& message, const std::string& now) {
  if (!status->is_object()) *status = Json::object();
  if (!status->contains("conditions") || !(*status)["conditions"].is_array()) (*status)["conditions"] = Json::array();
  const std::string text = value ? "True" : "False";
  for (auto& c : (*status)["conditions"]) {
    if (!c.is_object() || !c.contains("type") || c["type"] != type) continue;
    const bool flipped = !c.contains("status") || c["status"] != text;
    if (!flipped && StringAt(c, "reason") == reason && StringAt(c, "message") == message) return false;
    c["status"] = text;
    c["reason"] = reason;
    c["message"] = message;
    c["lastUpdateTime"] = now;
    if (flipped || !c.contains("lastTransitionTime")) c["lastTransitionTime"] = now;
    return true;
  }
  (*status)["conditions"].push_back({{"type", type},
                                     {"status", text},
                                     {"reason", reason},
                                     {"message", message},
                                     {"lastUpdateTime", now},
                                     {"lastTransitionTime", now}});
  return true;
}

bool IsFinished(const Json& status) {
  return IsConditionTrue(status, "Failed") || IsConditionTrue(status, "Succeeded");
}

std::string StateOf(const Json& status) {
  for (const char* type : {"Failed", "Succeeded", "Suspended", "Restarting", "Running", "Created"}) {
    if (IsConditionTrue(status, type)) return type;
  }
  return "";
}

Json ReplicaStatuses(const TrainingJobSpec& spec, const std::vector<Json>& pods) {
  Json out = Json::object();
  for (const auto& [type, r] : spec.replicas) {
    out[ReplicaTypeName(type)] = {{"active", 0}, {"succeeded", 0}, {"failed", 0}};
  }
  for (const Json& pod : pods) {
    const auto task = TaskOf(pod);
    if (!task || !out.contains(ReplicaTypeName(task->type))) continue;
    const Json& meta = At(pod, "metadata");
    if (meta.is_object() && meta.contains("deletionTimestamp")) continue;
    const Json& st = At(pod, "status");
    const std::string phase =
        st.is_object() && st.contains("phase") && st["phase"].is_string() ? st["phase"].get<std::string>() : "Pending";
    Json& counts = out[ReplicaTypeName(task->type)];
    if (phase == "Succeeded") {
      counts["succeeded"] = counts["succeeded"].get<int>() + 1;
    } else if (phase == "Failed") {
      counts["failed"] = counts["failed"].get<int>() + 1;
    } else {
      counts["active"] = counts["active"].get<int>() + 1;
    }
  }
  return out;
}

std::string FormatTime(int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int64_t ParseTime(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return -1;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace mf::op::training
