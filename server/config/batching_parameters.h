// --batching_parameters_file (BatchingParameters text format, wrapper values as in TF Serving:
// `max_batch_size { value: 128 }`) into validated BatchingOptions. Unset fields keep defaults.
#pragma once

#include <string>

#include "common/status.h"
#include "server/batching/batch_scheduler.h"
#include "tensorflow_serving/servables/tensorflow/session_bundle_config.pb.h"

namespace mf::server {

StatusOr<batching::BatchingOptions> BatchingOptionsFromProto(const tensorflow::serving::BatchingParameters& proto);
StatusOr<batching::BatchingOptions> LoadBatchingParametersFile(const std::string& path);

}  // namespace mf::server
