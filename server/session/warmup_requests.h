// Replays TF Serving's warm-up requests (codec/warmup_records.h) on a freshly loaded version,
// as tensorflow_model_server does with --enable_model_warmup (its default): the file is
// <version dir>/assets.extra/tf_serving_warmup_requests, next to model.onnx. The runtime's own
// zero-input run at load (session.h) happens either way; these requests warm the shapes real
// traffic uses (large batches, long sequences). A request that fails fails the load, as in TF
// Serving, so a version whose own warm-up data does not run never takes traffic.
#pragma once

#include <string>

#include "common/status.h"
#include "server/repository/servable.h"

namespace mf::server {

inline constexpr const char* kWarmupFileRelativePath = "assets.extra/tf_serving_warmup_requests";

// The warm-up file of the version whose model file is `model_path`.
std::string WarmupFilePath(const std::string& model_path);

// Runs each warm-up request of the version's file on `servable`, in order, `iterations` times
// each. OK when the version has no warm-up file; the first error otherwise, naming the file and
// record.
Status ReplayWarmupRequests(const Servable& servable, const std::string& model_path, int iterations = 1);

}  // namespace mf::server
