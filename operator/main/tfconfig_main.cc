// modelfleet-tfconfig: prints the environment the operator gives each pod of a TrainingJob
// (TF_CONFIG, or the PyTorch MASTER_*/RANK/PET_* set, and MODEL_DIR & co.), from the same code the
// controller runs, so tests can hand it to TensorFlow's and PyTorch's own readers.
//
//   kubectl create -f job.yaml --dry-run=client -o json | modelfleet-tfconfig
//   modelfleet-tfconfig --job job.json --distinct_ports
//
// Output: one JSON object, {"<pod name>": {"replicaType": "Worker", "index": 1, "env": {...}}}.
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/flags.h"
#include "trainingjob/cluster_env.h"

int main(int argc, char** argv) {
  std::string job_file;
  bool distinct_ports = false;
  std::string cluster_domain;
  int64_t model_version = 1;
  mf::FlagSet flags("modelfleet-tfconfig", "Prints the cluster environment of each pod of a TrainingJob (JSON in).");
  flags.Add("job", &job_file, "the TrainingJob as JSON (default: standard input)");
  flags.Add("distinct_ports", &distinct_ports, "pods share one network namespace: one port per task");
  flags.Add("cluster_domain", &cluster_domain, "appended after .svc in addresses (e.g. cluster.local)");
  flags.Add("model_version", &model_version, "the model version MODEL_DIR ends in");
  if (auto s = flags.Parse(argc, argv); !s.ok()) {
    std::cerr << "modelfleet-tfconfig: " << s.message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  std::stringstream text;
  if (job_file.empty()) {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(job_file);
    if (!in) {
      std::cerr << "modelfleet-tfconfig: cannot read " << job_file << "\n";
      return 1;
    }
    text << in.rdbuf();
  }
  const nlohmann::json object = nlohmann::json::parse(text.str(), nullptr, false);
  if (object.is_discarded()) {
    std::cerr
        << "modelfleet-tfconfig: the input is not JSON (convert YAML with kubectl create --dry-run=client -o json)\n";
    return 1;
  }
  auto spec = mf::op::training::ParseTrainingJob(object);
  if (!spec.ok()) {
    std::cerr << "modelfleet-tfconfig: " << spec.status().message() << "\n";
    return 1;
  }
  if (spec->ns.empty()) spec->ns = "default";
  const mf::op::training::ClusterEnvOptions options{
      .cluster_domain = cluster_domain, .distinct_ports = distinct_ports, .model_version = model_version};
  nlohmann::json out = nlohmann::json::object();
  for (const auto& task : mf::op::training::AllTasks(*spec)) {
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [k, v] : mf::op::training::ClusterEnv(*spec, task, options)) env[k] = v;
    out[mf::op::training::TaskName(*spec, task)] = {
        {"replicaType", mf::op::training::ReplicaTypeName(task.type)}, {"index", task.index}, {"env", env}};
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}
