// Label and field selectors, parsed once and matched against many objects (lists and watches).
// Syntax and semantics follow k8s.io/apimachinery/pkg/labels and pkg/fields.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace mf::local {

class LabelSelector {
 public:
  // "a=b,a==b,a!=b,a in (x,y),a notin (x),a,!a"; empty matches everything.
  static StatusOr<LabelSelector> Parse(std::string_view text);
  // From a metav1.LabelSelector object ({matchLabels, matchExpressions}), as in Deployment.spec.
  static StatusOr<LabelSelector> FromObject(const nlohmann::json& selector);
  // `labels` is metadata.labels (may be null).
  bool Matches(const nlohmann::json& labels) const;
  bool empty() const { return requirements_.empty(); }

 private:
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  std::vector<Requirement> requirements_;
};

class FieldSelector {
 public:
  // "metadata.name=x,spec.nodeName!=,status.phase==Running"; a path to a missing field compares
  // as "". Empty matches everything.
  static StatusOr<FieldSelector> Parse(std::string_view text);
  bool Matches(const nlohmann::json& object) const;
  bool empty() const { return terms_.empty(); }

 private:
  struct Term {
    std::vector<std::string> path;
    bool negate;
    std::string value;
  };
  std::vector<Term> terms_;
};

}  // namespace mf::local
