// The lifecycle of one model version, as TF Serving reports it (ModelVersionStatus.State):
// START -> LOADING -> AVAILABLE -> UNLOADING -> END; a failed load ends in END with an error.
// The repository speaks the codec's plain types (server/codec/model_info.h), so the REST and
// gRPC writers take the manager's answers unchanged.
#pragma once

#include "server/codec/model_info.h"

namespace mf::server {

using VersionState = codec::ModelVersionState;
using VersionStatus = codec::ModelVersionStatus;

}  // namespace mf::server
