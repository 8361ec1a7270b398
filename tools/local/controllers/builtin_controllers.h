// The reconcilers of the built-in controllers over the store: each reads what exists, asks its
// pure planner (deployment.h, replicaset.h, endpoints.h) what should exist and writes the
// difference. BuiltinControllers wires them to watches with ControllerLoop.
#pragma once

#include <memory>
#include <vector>

#include "tools/local/controllers/controller_loop.h"

namespace mf::local {

Status ReconcileDeployment(Store* store, const std::string& ns, const std::string& name);
Status ReconcileReplicaSet(Store* store, const std::string& ns, const std::string& name);
Status ReconcileServiceEndpoints(Store* store, const std::string& ns, const std::string& name);

class BuiltinControllers {
 public:
  explicit BuiltinControllers(Store* store);
  // Starts the loops for the resource types the store serves (a store without Deployments
  // simply has no Deployment controller).
  Status Start();
  void Stop();

 private:
  Store* const store_;
  std::vector<std::unique_ptr<ControllerLoop>> loops_;
};

}  // namespace mf::local
