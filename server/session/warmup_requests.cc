#include "server/session/warmup_requests.h"

#include <filesystem>
#include <fstream>

#include "common/logging.h"
#include "server/codec/model_info.h"
#include "server/codec/tf_serving_proto.h"
#include "server/codec/warmup_records.h"

namespace mf::server {
namespace {

// A warm-up file is read whole; larger than this it is refused rather than doubling a load's
// memory (1000 records of a 600 KB image are 600 MB).
constexpr uintmax_t kMaxWarmupFileBytes = uintmax_t{1} << 30;

}  // namespace

std::string WarmupFilePath(const std::string& model_path) {
  return (std::filesystem::path(model_path).parent_path() / kWarmupFileRelativePath).string();
}

Status ReplayWarmupRequests(const Servable& servable, const std::string& model_path, int iterations) {
  const std::string path = WarmupFilePath(model_path);
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) return Status::Ok();
  auto fail = [&path](const Status& s) { return s.WithContext("warm-up file " + path); };
  if (!std::filesystem::is_regular_file(status)) return fail(InvalidArgument("not a regular file"));
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return fail(NotFound(error.message()));
  if (size > kMaxWarmupFileBytes) {
    return fail(InvalidArgument(std::to_string(size) + " bytes; at most " + std::to_string(kMaxWarmupFileBytes)));
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  std::ifstream in(path, std::ios::binary);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    return fail(DataLoss("cannot read it whole (it changed while it was read?)"));
  }
  auto requests = codec::ParseWarmupRecords(bytes);
  if (!requests.ok()) return fail(requests.status());
  std::string().swap(bytes);  // the requests hold their own copy: not both through the runs
  for (size_t i = 0; i < requests->size(); ++i) {
    const std::string which = "warm-up request " + std::to_string(i) + " of " + std::to_string(requests->size());
    // As a Predict call would be: only the one signature our models have.
    const std::string& signature_name = (*requests)[i].model_spec().signature_name();
    if (!signature_name.empty() && signature_name != codec::kDefaultSignatureName) {
      return fail(InvalidArgument(which + ": the model has no signature '" + signature_name + "'"));
    }
    auto inputs = codec::InputsFromPredictRequest((*requests)[i], servable.signature().inputs);
    if (!inputs.ok()) return fail(inputs.status().WithContext(which));
    std::vector<const runtime::Tensor*> pointers;
    for (const runtime::Tensor& t : *inputs) pointers.push_back(&t);
    for (int run = 0; run < iterations; ++run) {
      Servable::Outputs outputs;
      if (Status s = servable.Run(pointers, &outputs); !s.ok()) return fail(s.WithContext(which));
    }
  }
  log::Info("warm-up requests replayed", {{"file", path}, {"requests", std::to_string(requests->size())}});
  return Status::Ok();
}

}  // namespace mf::server
