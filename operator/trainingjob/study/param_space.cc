#include "trainingjob/study/param_space.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <regex>
#include <set>

#include "parsing/cr_fields.h"

namespace mf::op::study {
namespace {

const std::string kPath = "spec.hyperparameters";
constexpr double kInf = std::numeric_limits<double>::infinity();

bool IsIntegral(double v) { return std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15; }

std::string Num(double v) { return FormatValue(Json(v)); }

StatusOr<ParamSpec> ParseParam(const Json& p, const std::string& path, Algorithm algorithm) {
  if (!p.is_object()) return InvalidArgument(path + " must be an object");
  ParamSpec spec;
  auto name = p.find("name");
  if (name == p.end() || !name->is_string()) return InvalidArgument(path + ".name is required (a string)");
  spec.name = name->get<std::string>();
  static const std::regex kName("^[A-Za-z_][A-Za-z0-9_-]*$");
  if (spec.name.size() > 128 || !std::regex_match(spec.name, kName)) {
    return InvalidArgument(path + ".name \"" + spec.name +
                           "\" is not a command-line flag name: use letters, digits, '_' and '-' (at most 128), "
                           "starting with a letter or '_'");
  }
  const std::string where = path + " (" + spec.name + ")";

  std::string type;
  if (auto s = OptionalEnum(p, "type", where, {"INTEGER", "DOUBLE", "CATEGORICAL", "DISCRETE"}, &type); !s.ok())
    return s;
  if (type.empty()) return InvalidArgument(where + ".type is required: INTEGER, DOUBLE, CATEGORICAL or DISCRETE");
  spec.type = type == "INTEGER"       ? ParamType::kInteger
              : type == "DOUBLE"      ? ParamType::kDouble
              : type == "CATEGORICAL" ? ParamType::kCategorical
                                      : ParamType::kDiscrete;
  std::string scale = "UNIT_LINEAR_SCALE";
  if (auto s = OptionalEnum(p, "scaleType", where, {"UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"},
                            &scale);
      !s.ok())
    return s;
  spec.scale = scale == "UNIT_LOG_SCALE"           ? Scale::kLog
               : scale == "UNIT_REVERSE_LOG_SCALE" ? Scale::kReverseLog
                                                   : Scale::kLinear;

  std::optional<double> min, max, step;
  if (auto s = OptionalNumber(p, "min", where, -kInf, kInf, &min); !s.ok()) return s;
  if (auto s = OptionalNumber(p, "max", where, -kInf, kInf, &max); !s.ok()) return s;
  if (auto s = OptionalNumber(p, "step", where, -kInf, kInf, &step); !s.ok()) return s;
  if (step && spec.type != ParamType::kDouble)
    return InvalidArgument(where + ".step is only for DOUBLE parameters (INTEGER steps by 1)");

  switch (spec.type) {
    case ParamType::kInteger:
    case ParamType::kDouble: {
      if (!min || !max) return InvalidArgument(where + " needs min and max");
      if (*min > *max)
        return InvalidArgument(where + ".min (" + Num(*min) + ") is greater than max (" + Num(*max) + ")");
      if (spec.type == ParamType::kInteger && (!IsIntegral(*min) || !IsIntegral(*max)))
        return InvalidArgument(where + ": an INTEGER parameter needs whole-number min and max");
      spec.min = *min;
      spec.max = *max;
      if (step) {
        if (*step <= 0) return InvalidArgument(where + ".step must be greater than 0");
        if ((*max - *min) / *step > 1e6)
          return InvalidArgument(where + ".step is so small that the grid has over a million values");
        spec.step = step;
      }
      if (algorithm == Algorithm::kGrid && spec.type == ParamType::kDouble && !spec.step) {
        return InvalidArgument(where +
                               ": grid search cannot enumerate a DOUBLE range; give it a step, or make it "
                               "DISCRETE with discreteValues");
      }
      break;
    }
    case ParamType::kCategorical: {
      auto values = p.find("values");
      if (values == p.end() || !values->is_array() || values->empty())
        return InvalidArgument(where + " is CATEGORICAL and needs a non-empty list of values");
      std::set<std::string> seen;
      for (const auto& v : *values) {
        if (!v.is_string() || v.get<std::string>().empty())
          return InvalidArgument(where + ".values must be non-empty strings");
        if (!seen.insert(v.get<std::string>()).second)
          return InvalidArgument(where + ".values lists \"" + v.get<std::string>() + "\" twice");
        spec.categories.push_back(v.get<std::string>());
      }
      if (spec.scale != Scale::kLinear) return InvalidArgument(where + ": a CATEGORICAL parameter has no scaleType");
      if (min || max) return InvalidArgument(where + ": a CATEGORICAL parameter has values, not min and max");
      break;
    }
    case ParamType::kDiscrete: {
      auto values = p.find("discreteValues");
      if (values == p.end() || !values->is_array() || values->empty())
        return InvalidArgument(where + " is DISCRETE and needs a non-empty list of numbers in discreteValues");
      for (const auto& v : *values) {
        if (!v.is_number() || !std::isfinite(v.get<double>()))
          return InvalidArgument(where + ".discreteValues must be finite numbers; got " + v.dump());
        spec.discrete.push_back(v.get<double>());
      }
      std::sort(spec.discrete.begin(), spec.discrete.end());
      if (auto dup = std::adjacent_find(spec.discrete.begin(), spec.discrete.end()); dup != spec.discrete.end())
        return InvalidArgument(where + ".discreteValues lists " + Num(*dup) + " twice");
      if (min || max) return InvalidArgument(where + ": a DISCRETE parameter has discreteValues, not min and max");
      spec.min = spec.discrete.front();
      spec.max = spec.discrete.back();
      break;
    }
  }
  if (spec.scale != Scale::kLinear && spec.min <= 0) {
    return InvalidArgument(where + ": " + scale + " needs every value greater than 0, but the smallest is " +
                           Num(spec.min));
  }
  return spec;
}

// The interval a numeric parameter's scale spans. An INTEGER's reaches half a unit past each end so
// that rounding gives every integer, the ends included, an equal share of the cube.
std::pair<double, double> Interval(const ParamSpec& p) {
  if (p.type == ParamType::kInteger) {
    // A log scale needs a positive lower end: min >= 1 there, so min - 0.5 >= 0.5.
    return {p.min - 0.5, p.max + 0.5};
  }
  return {p.min, p.max};
}

double ValueToUnit(const ParamSpec& p, double v) {
  const auto [lo, hi] = Interval(p);
  if (hi <= lo) return 0.5;
  double u = 0;
  switch (p.scale) {
    case Scale::kLinear:
      u = (v - lo) / (hi - lo);
      break;
    case Scale::kLog:
      u = (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo));
      break;
    case Scale::kReverseLog:  // dense near max: the log scale mirrored
      u = 1.0 - (std::log(hi + lo - v) - std::log(lo)) / (std::log(hi) - std::log(lo));
      break;
  }
  return std::clamp(u, 0.0, 1.0);
}

double UnitToValue(const ParamSpec& p, double u) {
  const auto [lo, hi] = Interval(p);
  u = std::clamp(std::isfinite(u) ? u : 0.5, 0.0, 1.0);
  if (hi <= lo) return lo;
  switch (p.scale) {
    case Scale::kLinear:
      return lo + u * (hi - lo);
    case Scale::kLog:
      return std::exp(std::log(lo) + u * (std::log(hi) - std::log(lo)));
    case Scale::kReverseLog:
      return hi + lo - std::exp(std::log(lo) + (1.0 - u) * (std::log(hi) - std::log(lo)));
  }
  return lo;
}

int64_t GridCount(const ParamSpec& p) {
  switch (p.type) {
    case ParamType::kInteger:
      return static_cast<int64_t>(p.max - p.min) + 1;
    case ParamType::kCategorical:
      return static_cast<int64_t>(p.categories.size());
    case ParamType::kDiscrete:
      return static_cast<int64_t>(p.discrete.size());
    case ParamType::kDouble:
      if (!p.step) return std::numeric_limits<int64_t>::max();
      return static_cast<int64_t>(std::floor((p.max - p.min) / *p.step + 1e-9)) + 1;
  }
  return 1;
}

Json GridValue(const ParamSpec& p, int64_t k) {
  switch (p.type) {
    case ParamType::kInteger:
      return static_cast<int64_t>(p.min) + k;
    case ParamType::kCategorical:
      return p.categories[static_cast<size_t>(k)];
    case ParamType::kDiscrete:
      return p.discrete[static_cast<size_t>(k)];
    case ParamType::kDouble:
      return std::min(p.max, p.min + static_cast<double>(k) * p.step.value_or(0));
  }
  return nullptr;
}

}  // namespace

int ParamSpec::Dims() const { return type == ParamType::kCategorical ? static_cast<int>(categories.size()) : 1; }

StatusOr<StudySpec> ParseStudySpec(const Json& h) {
  if (!h.is_object()) return InvalidArgument(kPath + " must be an object");
  StudySpec spec;
  std::string goal = "MAXIMIZE";
  if (auto s = OptionalEnum(h, "goal", kPath, {"MAXIMIZE", "MINIMIZE"}, &goal); !s.ok()) return s;
  spec.maximize = goal == "MAXIMIZE";

  auto tag = h.find("metricTag");
  if (tag == h.end() || !tag->is_string() || tag->get<std::string>().empty())
    return InvalidArgument(kPath + ".metricTag is required: the name the trainer reports, as in 'modelfleet-metric " +
                           "accuracy=0.97'");
  spec.metric_tag = tag->get<std::string>();
  if (spec.metric_tag.find_first_of(" \t\r\n=") != std::string::npos)
    return InvalidArgument(kPath + ".metricTag \"" + spec.metric_tag + "\" may not contain spaces or '='");

  if (!h.contains("maxTrials")) return InvalidArgument(kPath + ".maxTrials is required (1 to 1000)");
  if (auto s = OptionalInt(h, "maxTrials", kPath, 1, 1000, &spec.max_trials); !s.ok()) return s;
  if (auto s = OptionalInt(h, "maxParallelTrials", kPath, 1, 1000, &spec.max_parallel_trials); !s.ok()) return s;
  if (auto s = OptionalInt(h, "maxFailedTrials", kPath, 0, 1000, &spec.max_failed_trials); !s.ok()) return s;

  std::string algorithm = "random";
  if (auto s = OptionalEnum(h, "algorithm", kPath, {"random", "grid", "bayesian"}, &algorithm); !s.ok()) return s;
  spec.algorithm = algorithm == "grid"       ? Algorithm::kGrid
                   : algorithm == "bayesian" ? Algorithm::kBayesian
                                             : Algorithm::kRandom;
  if (auto it = h.find("enableTrialEarlyStopping"); it != h.end() && !it->is_null()) {
    if (!it->is_boolean()) return InvalidArgument(kPath + ".enableTrialEarlyStopping must be true or false");
    spec.early_stopping = it->get<bool>();
  }

  auto params = h.find("params");
  if (params == h.end() || !params->is_array() || params->empty())
    return InvalidArgument(kPath + ".params must list at least one parameter");
  if (params->size() > 100) return InvalidArgument(kPath + ".params has more than 100 parameters");
  std::set<std::string> names;
  for (size_t i = 0; i < params->size(); ++i) {
    auto p = ParseParam((*params)[i], kPath + ".params[" + std::to_string(i) + "]", spec.algorithm);
    if (!p.ok()) return p.status();
    if (!names.insert(p->name).second)
      return InvalidArgument(kPath + ".params names \"" + p->name + "\" twice; each parameter needs its own name");
    spec.params.push_back(std::move(*p));
  }
  return spec;
}

ParamSpace::ParamSpace(std::vector<ParamSpec> params) : params_(std::move(params)) {
  for (const auto& p : params_) dims_ += p.Dims();
}

Json ParamSpace::FromUnit(const std::vector<double>& unit) const {
  Json point = Json::object();
  size_t d = 0;
  for (const auto& p : params_) {
    auto at = [&](size_t i) { return i < unit.size() && std::isfinite(unit[i]) ? unit[i] : 0.5; };
    switch (p.type) {
      case ParamType::kCategorical: {
        size_t best = 0;
        for (size_t k = 1; k < p.categories.size(); ++k) {
          if (at(d + k) > at(d + best)) best = k;
        }
        point[p.name] = p.categories[best];
        break;
      }
      case ParamType::kInteger: {
        const double v = std::clamp(std::round(UnitToValue(p, at(d))), p.min, p.max);
        point[p.name] = static_cast<int64_t>(v);
        break;
      }
      case ParamType::kDouble:
        point[p.name] = std::clamp(UnitToValue(p, at(d)), p.min, p.max);
        break;
      case ParamType::kDiscrete: {
        // The value nearest on the parameter's own scale.
        const double u = std::clamp(at(d), 0.0, 1.0);
        double best = p.discrete.front();
        double best_gap = std::numeric_limits<double>::infinity();
        for (double v : p.discrete) {
          const double gap = std::fabs(ValueToUnit(p, v) - u);
          if (gap < best_gap) best = v, best_gap = gap;
        }
        point[p.name] = best;
        break;
      }
    }
    d += static_cast<size_t>(p.Dims());
  }
  return point;
}

StatusOr<std::vector<double>> ParamSpace::ToUnit(const Json& point) const {
  if (!point.is_object()) return InvalidArgument("trial parameters must be an object");
  std::vector<double> unit;
  unit.reserve(static_cast<size_t>(dims_));
  for (const auto& p : params_) {
    auto it = point.find(p.name);
    if (it == point.end()) return NotFound("the trial has no value for parameter " + p.name);
    const Json& v = *it;
    const std::string bad = "the trial's " + p.name + "=" + v.dump() + " is outside the study's space";
    switch (p.type) {
      case ParamType::kCategorical: {
        auto found = v.is_string() ? std::find(p.categories.begin(), p.categories.end(), v.get<std::string>())
                                   : p.categories.end();
        if (found == p.categories.end()) return InvalidArgument(bad);
        for (size_t k = 0; k < p.categories.size(); ++k) unit.push_back(p.categories.begin() + k == found ? 1 : 0);
        break;
      }
      case ParamType::kInteger:
        if (!v.is_number() || !IsIntegral(v.get<double>()) || v.get<double>() < p.min || v.get<double>() > p.max)
          return InvalidArgument(bad);
        unit.push_back(ValueToUnit(p, v.get<double>()));
        break;
      case ParamType::kDouble: {
        const double slack = 1e-9 * std::max(1.0, std::fabs(p.max - p.min));
        if (!v.is_number() || v.get<double>() < p.min - slack || v.get<double>() > p.max + slack)
          return InvalidArgument(bad);
        unit.push_back(ValueToUnit(p, std::clamp(v.get<double>(), p.min, p.max)));
        break;
      }
      case ParamType::kDiscrete: {
        if (!v.is_number()) return InvalidArgument(bad);
        const double x = v.get<double>();
        auto match = std::find_if(p.discrete.begin(), p.discrete.end(),
                                  [x](double d) { return std::fabs(d - x) <= 1e-12 * std::max(1.0, std::fabs(d)); });
        if (match == p.discrete.end()) return InvalidArgument(bad);
        unit.push_back(ValueToUnit(p, *match));
        break;
      }
    }
  }
  return unit;
}

std::vector<double> ParamSpace::Project(const std::vector<double>& unit) const {
  auto projected = ToUnit(FromUnit(unit));
  return projected.ok() ? *projected : unit;  // FromUnit gives legal points, so ToUnit succeeds
}

int64_t ParamSpace::GridSize() const {
  int64_t size = 1;
  for (const auto& p : params_) {
    const int64_t n = GridCount(p);
    if (n <= 0) return 0;
    if (size > std::numeric_limits<int64_t>::max() / n) return std::numeric_limits<int64_t>::max();
    size *= n;
  }
  return size;
}

Json ParamSpace::GridPoint(int64_t index) const {
  Json point = Json::object();
  for (auto p = params_.rbegin(); p != params_.rend(); ++p) {
    const int64_t n = GridCount(*p);
    point[p->name] = GridValue(*p, index % n);
    index /= n;
  }
  return point;
}

std::vector<std::string> TrialArgs(const std::vector<ParamSpec>& params, const Json& point) {
  std::vector<std::string> args;
  for (const auto& p : params) {
    auto it = point.find(p.name);
    if (it != point.end()) args.push_back("--" + p.name + "=" + FormatValue(*it));
  }
  return args;
}

std::string FormatValue(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return value.dump();
  if (value.is_number()) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value.get<double>());
    if (ec == std::errc()) return std::string(buf, end);
  }
  return value.dump();
}

}  // namespace mf::op::study
