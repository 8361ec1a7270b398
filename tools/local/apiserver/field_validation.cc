#include "tools/local/apiserver/field_validation.h"

namespace mf::local {
namespace {
thread_local FieldValidationScope* current_scope = nullptr;
}  // namespace

StatusOr<FieldValidation> ParseFieldValidation(std::string_view text) {
  if (text.empty() || text == "Warn") return FieldValidation::kWarn;
  if (text == "Ignore") return FieldValidation::kIgnore;
  if (text == "Strict") return FieldValidation::kStrict;
  return FailedPrecondition("fieldValidation must be one of Ignore, Warn or Strict, not \"" + std::string(text) + "\"");
}

FieldValidationScope::FieldValidationScope(FieldValidation mode) : mode_(mode), previous_(current_scope) {
  current_scope = this;
}

FieldValidationScope::~FieldValidationScope() { current_scope = previous_; }

FieldValidation FieldValidationScope::Current() {
  return current_scope ? current_scope->mode_ : FieldValidation::kIgnore;
}

Status FieldValidationScope::ReportUnknownFields(const std::vector<std::string>& fields) {
  if (fields.empty() || !current_scope) return Status::Ok();
  if (current_scope->mode_ == FieldValidation::kStrict) {
    std::string message = "strict decoding error: ";
    for (size_t i = 0; i < fields.size(); ++i) message += (i ? ", " : "") + std::string("unknown field \"") + fields[i] + "\"";
    return FailedPrecondition(message);
  }
  if (current_scope->mode_ == FieldValidation::kWarn) {
    current_scope->unknown_.insert(current_scope->unknown_.end(), fields.begin(), fields.end());
  }
  return Status::Ok();
}

}  // namespace mf::local
