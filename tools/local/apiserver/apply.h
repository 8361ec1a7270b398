// Server-side apply (PATCH application/apply-patch+yaml) and the field ownership it rests on:
// metadata.managedFields entries (manager, operation Apply|Update, FieldsV1 sets). Applying
// sets the fields in the applied configuration, removes fields this manager applied before and
// no longer does (unless another manager owns them), and reports a conflict (409) when a field
// owned by another manager would change value, unless forced (then ownership moves).
// Lists are merged by key where the key is known (strategic merge keys, x-kubernetes-list-map-keys)
// and treated as atomic otherwise.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace mf::local {

struct ApplyRequest {
  std::string manager;      // fieldManager, required
  bool force = false;
  std::string api_version;  // recorded in managedFields
  std::string time;         // RFC 3339, recorded in managedFields
};

// `current` is null when the object does not exist yet. The result still needs the store's
// metadata handling (uid, resourceVersion, ...). ABORTED lists the conflicting fields.
StatusOr<nlohmann::json> ServerSideApply(const nlohmann::json& current, const nlohmann::json& applied,
                                         const ApplyRequest& request);

// For every non-apply write: `manager` (operation Update) becomes the owner of the fields whose
// value differs between `before` and `after`, which leave other managers' sets.
void RecordUpdate(nlohmann::json& after, const nlohmann::json& before, const std::string& manager,
                  const std::string& api_version, const std::string& time);

}  // namespace mf::local
