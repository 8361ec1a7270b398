#include "server/codec/warmup_records.h"

#include <string>

#include "server/codec/tfrecord.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"

namespace mf::codec {

StatusOr<std::vector<tensorflow::serving::PredictRequest>> ParseWarmupRecords(std::string_view file) {
  MF_ASSIGN_OR_RETURN(std::vector<std::string_view> records, SplitTfRecords(file, kMaxWarmupRecords));
  std::vector<tensorflow::serving::PredictRequest> requests;
  requests.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string which = "warm-up record " + std::to_string(i);
    tensorflow::serving::PredictionLog log;
    if (!log.ParseFromArray(records[i].data(), static_cast<int>(records[i].size()))) {
      return InvalidArgument(which + " is not a tensorflow.serving.PredictionLog");
    }
    if (log.log_type_case() == tensorflow::serving::PredictionLog::LOG_TYPE_NOT_SET) {
      return InvalidArgument(which + " holds no log (expected a predict_log)");
    }
    if (log.log_type_case() != tensorflow::serving::PredictionLog::kPredictLog) {
      const std::string kind = log.GetDescriptor()->FindFieldByNumber(log.log_type_case())->name();
      return InvalidArgument(which + " is a " + kind + " record; models served here have a predict signature " +
                             "only, so only predict_log records can be replayed");
    }
    requests.push_back(std::move(*log.mutable_predict_log()->mutable_request()));
  }
  return requests;
}

}  // namespace mf::codec
