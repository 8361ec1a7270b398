// The fieldValidation query parameter (Ignore | Warn | Strict; kubectl apply sends Strict) for the
// request being handled on this thread. The store runs admission synchronously on the caller's
// thread, so admission reads the mode from here and reports the unknown fields it pruned: CRD
// admission from the CRD's schema, built-in kinds' from their generated schemas
// (WithBuiltinFieldValidation).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tools/local/store/store.h"

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
  // True while a client request is being served on this thread (writes by in-process controllers
  // are not).
  static bool InRequest();
  // Called by admission with the fields it pruned: an error under kStrict, recorded under kWarn.
  // `decoded_as`, for built-in kinds, is the kind kube-apiserver names in its strict decoding
  // error ("Deployment in version \"v1\" cannot be handled as a Deployment: ...").
  static Status ReportUnknownFields(const std::vector<std::string>& fields, const std::string& decoded_as = "",
                                    const std::string& version = "");

 private:
  FieldValidation mode_;
  FieldValidationScope* previous_;
  std::vector<std::string> unknown_;
};

// `type` (a built-in kind) with kube-apiserver's decoding in front of its admission: in a client
// request, fields the kind's schema does not declare are dropped and reported to the request's
// field validation. Writes by in-process controllers are trusted and left as they are. A kind
// without a generated schema is returned unchanged.
ResourceType WithBuiltinFieldValidation(ResourceType type);

}  // namespace mf::local
