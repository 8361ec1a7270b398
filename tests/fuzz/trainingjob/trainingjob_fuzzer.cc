// Feeds arbitrary JSON to everything the TrainingJob controller derives from objects others write:
// {"job": <TrainingJob>, "pods": [<Pod>...], "nodes": [<Node>...], "md": <ModelDeployment>}. The
// job is parsed; a valid one gets its env, pods, Services, a lifecycle decision over the given pods
// (as its own, whatever their labels say), a gang check and a hand-off patch. Nothing may crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "trainingjob/desired.h"
#include "trainingjob/gang.h"
#include "trainingjob/handoff.h"
#include "trainingjob/lifecycle.h"
#include "trainingjob/status.h"

using mf::op::training::Json;

namespace {

std::vector<Json> Items(const Json& input, const char* key) {
  std::vector<Json> out;
  if (input.is_object() && input.contains(key) && input[key].is_array()) {
    for (const auto& item : input[key]) out.push_back(item);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Json input = Json::parse(std::string(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (input.is_discarded() || !input.is_object() || !input.contains("job")) return 0;
  namespace t = mf::op::training;
  auto spec = t::ParseTrainingJob(input["job"]);
  const std::vector<Json> pods = Items(input, "pods");
  const std::vector<Json> nodes = Items(input, "nodes");
  if (!spec.ok()) {
    (void)t::InvalidSpecStatus(t::At(input["job"], "status"), "job", spec.status().message(), 0);
    return 0;
  }
  if (spec->TotalReplicas() > 64) return 0;  // the work grows with the replicas; big ones say nothing new
  for (bool distinct : {false, true}) {
    const t::ClusterEnvOptions options{
        .cluster_domain = "cluster.local", .distinct_ports = distinct, .model_version = 3};
    for (const t::Task& task : t::AllTasks(*spec)) {
      (void)t::ClusterEnv(*spec, task, options);
      (void)t::DesiredPod(*spec, task, options);
      (void)t::DesiredService(*spec, task, options);
    }
  }
  for (const Json& pod : pods) (void)t::TaskOf(pod);
  const Json status = input["job"].is_object() ? input["job"].value("status", Json::object()) : Json::object();
  const int64_t now = 1'700'000'000;
  (void)t::WantsGangStart(*spec, status, pods);
  (void)t::Decide({.spec = &*spec, .old_status = status, .pods = pods, .now = now, .gang_problem = ""});
  (void)t::Decide({.spec = &*spec, .old_status = status, .pods = pods, .now = now, .gang_problem = "full"});
  std::vector<std::pair<std::string, Json>> wanted;
  for (const t::Task& task : t::AllTasks(*spec)) {
    wanted.emplace_back(t::TaskName(*spec, task), t::DesiredPod(*spec, task, {})["spec"]);
  }
  (void)t::CheckGangFits(t::FreeRoom(nodes, pods), wanted);
  if (input.contains("md") && spec->output.deploy_to) {
    (void)t::NextModelVersion(input["md"]);
    (void)t::BuildHandoff(input["md"], *spec, 3);
  }
  return 0;
}
