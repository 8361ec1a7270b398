// A hyperparameter study's spec (spec.hyperparameters, Google AI Platform's HyperparameterSpec) and
// its search space. Every point of the space has a position in a unit cube: one coordinate in
// [0, 1] per INTEGER, DOUBLE or DISCRETE parameter, placed by its scale (linear, log, reverse log),
// and a one-hot block per CATEGORICAL parameter. Random search samples the cube, the Gaussian
// process models it, and FromUnit() turns any position back into legal values, so a point the
// planner records is always one the trainer can be given.
//
// The CRD's schema rejects most bad specs at admission; ParseStudySpec() checks everything again
// and adds what the schema cannot say (a log scale over values <= 0, a DOUBLE in a grid without a
// step, duplicate names), each error naming the field and what to do.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace mf::op::study {

using Json = nlohmann::json;

enum class ParamType { kInteger, kDouble, kCategorical, kDiscrete };
enum class Scale { kLinear, kLog, kReverseLog };
enum class Algorithm { kRandom, kGrid, kBayesian };

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kDouble;
  Scale scale = Scale::kLinear;
  double min = 0;  // INTEGER and DOUBLE; DISCRETE: the smallest value
  double max = 0;
  std::vector<std::string> categories;  // CATEGORICAL, in the spec's order
  std::vector<double> discrete;         // DISCRETE, ascending, unique
  std::optional<double> step;           // DOUBLE: the grid's spacing (grid search only)

  // Unit-cube coordinates this parameter takes: 1, or one per category.
  int Dims() const;
};

struct StudySpec {
  bool maximize = true;
  std::string metric_tag;
  int64_t max_trials = 1;
  int64_t max_parallel_trials = 1;
  // Failed trials after which the study gives up; 0 = as AI Platform: when the first trials all fail.
  int64_t max_failed_trials = 0;
  Algorithm algorithm = Algorithm::kRandom;
  bool early_stopping = false;  // enableTrialEarlyStopping: the median stopping rule
  std::vector<ParamSpec> params;
};

// INVALID_ARGUMENT naming the field (spec.hyperparameters.params[1].min, ...) and what is wrong.
StatusOr<StudySpec> ParseStudySpec(const Json& hyperparameters);

// The space of parameter assignments. A point is a JSON object {name: value}: an integer for
// INTEGER, a number for DOUBLE and DISCRETE, a string for CATEGORICAL.
class ParamSpace {
 public:
  explicit ParamSpace(std::vector<ParamSpec> params);

  const std::vector<ParamSpec>& params() const { return params_; }
  int dims() const { return dims_; }

  // Legal values for any position (coordinates outside [0, 1] are clamped; a categorical block
  // takes its largest coordinate).
  Json FromUnit(const std::vector<double>& unit) const;
  // The position of a point; NotFound/InvalidArgument when it lacks a parameter or holds a value
  // the space does not (a study whose spec changed under recorded trials).
  StatusOr<std::vector<double>> ToUnit(const Json& point) const;
  // ToUnit(FromUnit(unit)): the position the trainer would really be run at (integers rounded,
  // discrete values snapped, one category chosen).
  std::vector<double> Project(const std::vector<double>& unit) const;

  // Grid search: how many points (saturating at INT64_MAX), and the index-th of them in
  // row-major order (the last parameter varies fastest).
  int64_t GridSize() const;
  Json GridPoint(int64_t index) const;

 private:
  std::vector<ParamSpec> params_;
  int dims_ = 0;
};

// The `--name=value` arguments a trial's containers get, in the spec's parameter order.
std::vector<std::string> TrialArgs(const std::vector<ParamSpec>& params, const Json& point);

// A value as the trainer reads it: integers without a decimal point, doubles in the shortest
// form that reads back exactly, strings as they are.
std::string FormatValue(const Json& value);

}  // namespace mf::op::study
