// Kubernetes API errors as mf::Status. The API server answers failures with a `Status` object
// ({"kind":"Status","reason":"Conflict","message":...,"code":409}); its reason and message are
// kept in the Status message ("Conflict: Operation cannot be fulfilled ... (HTTP 409)") and the
// HTTP code picks the canonical code, so callers branch on the predicates below.
#pragma once

#include <string>

#include "common/status.h"
#include "k8s/transport.h"

namespace mf::k8s {

// Maps an HTTP error response to a Status. `what` names the request ("PUT /api/v1/...").
Status StatusFromResponse(const HttpResponse& response, const std::string& what);
// Same, for a Status object delivered inside a watch ERROR event.
Status StatusFromStatusObject(const std::string& status_json, const std::string& what);

// 404: the object does not exist.
bool IsNotFound(const Status& s);
// 409 reason AlreadyExists: create of an existing name.
bool IsAlreadyExists(const Status& s);
// 409 reason Conflict: the resourceVersion in an update was stale.
bool IsConflict(const Status& s);
// 410 Gone / Expired: a watch or list resourceVersion too old; relist.
bool IsGone(const Status& s);

}  // namespace mf::k8s
