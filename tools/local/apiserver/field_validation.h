// The fieldValidation query parameter (Ignore | Warn | Strict; kubectl apply sends Strict) for the
// request being handled on this thread. The store runs admission synchronously on the caller's
// thread, so CRD admission reads the mode from here and reports the unknown fields it pruned.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mf::local {

enum class FieldValidation { kIgnore, kWarn, kStrict };

StatusOr<FieldValidation> ParseFieldValidation(std::string_view text);  // "" -> kWarn (the default)

class FieldValidationScope {
 public:
  explicit FieldValidationScope(FieldValidation mode);
  ~FieldValidationScope();
  FieldValidationScope(const FieldValidationScope&) = delete;
  FieldValidationScope& operator=(const FieldValidationScope&) = delete;

  // Unknown fields reported under kWarn, for Warning headers.
  const std::vector<std::string>& unknown_fields() const { return unknown_; }

  // kIgnore outside any scope (writes from controllers in the same process).
  static FieldValidation Current();
  // Called by admission with the fields it pruned: an error under kStrict, recorded under kWarn.
  static Status ReportUnknownFields(const std::vector<std::string>& fields);

 private:
  FieldValidation mode_;
  FieldValidationScope* previous_;
  std::vector<std::string> unknown_;
};

}  // namespace mf::local
