// Placeholder until the study code lands (train-study replaces this file): a study job is
// reported as not supported, so the controller builds and links without it.
#include "trainingjob/study/study_reconcile.h"

namespace mf::op::study {

StudyOutcome ReconcileStudy(const StudyContext&, const nlohmann::json& job, const training::TrainingJobSpec&) {
  StudyOutcome out;
  out.status = job.value("status", nlohmann::json::object());
  out.status["state"] = "Failed";
  out.status["conditions"] = nlohmann::json::array(
      {{{"type", "Failed"},
        {"status", "True"},
        {"reason", "StudiesNotSupported"},
        {"message", "this operator build has no hyperparameter studies yet"}}});
  return out;
}

}  // namespace mf::op::study
