// TF Serving's warm-up data: a TFRecord file (tfrecord.h) of tensorflow.serving.PredictionLog
// messages, which tensorflow_model_server replays at load time, before a version takes traffic.
// A model moved over from TF Serving keeps its file at <version>/assets.extra/.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tensorflow_serving/apis/predict.pb.h"

namespace mf::codec {

// TF Serving refuses warm-up files with more records than this.
inline constexpr size_t kMaxWarmupRecords = 1000;

// The PredictRequests of a warm-up file's records, in order. Errors name the record: DATA_LOSS
// for broken framing, INVALID_ARGUMENT for a record that is not a PredictionLog, for a log of
// another kind (classify, regress, multi-inference, session run: our models have a predict
// signature only) and for more than kMaxWarmupRecords records.
StatusOr<std::vector<tensorflow::serving::PredictRequest>> ParseWarmupRecords(std::string_view file);

}  // namespace mf::codec
