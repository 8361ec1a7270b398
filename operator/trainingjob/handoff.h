// Hand-off to serving: a succeeded job's model, <modelUri>/<version> (the trainer wrote
// model.onnx there), becomes the newest version of the ModelDeployment spec.output.deployTo
// names, at canaryPercent of the traffic; the other versions keep their proportions of the rest.
// The new version is last in spec.versions, so a ModelDeployment with spec.rollout treats it as
// the canary and its rollout machinery takes over from there.
#pragma once

#include <string>

#include "common/status.h"
#include "trainingjob/spec.h"

namespace mf::op::training {

// The version number a job deploying to this ModelDeployment writes: one above the largest of its
// versions' numbers (VersionNumber() of each name), so TF Serving's "highest number" rule agrees.
int64_t NextModelVersion(const Json& model_deployment);

struct Handoff {
  bool already_done = false;  // a version with this storageUri is already there
  std::string version;        // its name, e.g. "v3"
  std::string storage_uri;    // <modelUri>/<model version>
  Json patch;                 // JSON merge patch of the ModelDeployment (resourceVersion-guarded)
};

// The patch that adds the job's model. FailedPrecondition when the ModelDeployment cannot take it
// (no spec.versions).
StatusOr<Handoff> BuildHandoff(const Json& model_deployment, const TrainingJobSpec& spec, int64_t model_version);

}  // namespace mf::op::training
