#include "tools/local/apiserver/field_validation.h"

#include <set>

#include "tools/local/openapi/builtin_schemas.h"

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

bool FieldValidationScope::InRequest() { return current_scope != nullptr; }

Status FieldValidationScope::ReportUnknownFields(const std::vector<std::string>& fields, const std::string& decoded_as,
                                                 const std::string& version) {
  if (fields.empty() || !current_scope) return Status::Ok();
  if (current_scope->mode_ == FieldValidation::kStrict) {
    std::string message;
    if (!decoded_as.empty()) message = decoded_as + " in version \"" + version + "\" cannot be handled as a " + decoded_as + ": ";
    message += "strict decoding error: ";
    for (size_t i = 0; i < fields.size(); ++i) message += (i ? ", " : "") + std::string("unknown field \"") + fields[i] + "\"";
    return FailedPrecondition(message);
  }
  if (current_scope->mode_ == FieldValidation::kWarn) {
    current_scope->unknown_.insert(current_scope->unknown_.end(), fields.begin(), fields.end());
  }
  return Status::Ok();
}

ResourceType WithBuiltinFieldValidation(ResourceType type) {
  auto schema = BuiltinSchemaName(type.gvr.group, type.gvr.version, type.kind);
  if (!schema) return type;
  type.admit = [admit = std::move(type.admit), schema = *schema, kind = type.kind, version = type.gvr.version](
                   nlohmann::json& object, const nlohmann::json* old) -> Status {
    if (FieldValidationScope::InRequest()) {
      // Only what this request brings in: unknown fields already stored (written by in-process
      // controllers, or carried over from the stored status) stay and are not reported.
      std::set<std::string> stored;
      if (old) {
        nlohmann::json copy = *old;
        for (auto& path : PruneUnknownBuiltinFields(copy, schema)) stored.insert(std::move(path));
      }
      MF_RETURN_IF_ERROR(FieldValidationScope::ReportUnknownFields(PruneUnknownBuiltinFields(object, schema, stored), kind, version));
    }
    return admit ? admit(object, old) : Status::Ok();
  };
  return type;
}

}  // namespace mf::local
