// Input: one selector byte, then either a trainer's output (metric lines) or a JSON document used
// as spec.hyperparameters, as a recorded trial and as a trial's parameters.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "trainingjob/study/planner.h"
#include "trainingjob/study/suggest.h"

using mf::op::study::Json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    (void)mf::op::study::ParseMetrics(text, "accuracy", data[0] % 4 == 0);
    return 0;
  }
  const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  const mf::op::study::Trial trial = mf::op::study::Trial::FromStatus(doc);
  (void)trial.ToStatus();
  auto spec = mf::op::study::ParseStudySpec(doc);
  if (!spec.ok()) return 0;
  const mf::op::study::ParamSpace space(spec->params);
  (void)space.ToUnit(doc);
  (void)space.ToUnit(trial.parameters);
  if (space.GridSize() > 0 && spec->algorithm == mf::op::study::Algorithm::kGrid) {
    (void)space.GridPoint(space.GridSize() - 1);
  }
  mf::op::study::Rng rng(size);
  (void)mf::op::study::TrialArgs(spec->params, space.FromUnit(mf::op::study::SampleRandom(space, rng)));
  // Plan with the document's own trial recorded, as a hand-edited status would hold it.
  spec->max_trials = std::min<int64_t>(spec->max_trials, 4);
  (void)mf::op::study::PlanStudy(*spec, {trial}, size, "fuzz", "2026-01-01T00:00:00Z");
  return 0;
}
