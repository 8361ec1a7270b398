// Metrics of the model repository, registered once in the process-wide registry:
//   modelfleet_model_version_state{model,version}   gauge, TF Serving's state number
//                                                   (10 START .. 30 AVAILABLE .. 50 END)
//   modelfleet_model_load_failures_total{model}     counter
//   modelfleet_model_storage_errors_total{model}    counter, polls that could not read the
//                                                   base path (storage glitches)
//   modelfleet_model_load_seconds{model}            histogram, load + warm-up time
//   modelfleet_model_memory_bytes{model,version}    gauge, what a loaded version holds (weights
//                                                   + activation plan); 0 once unloaded
//   modelfleet_model_gpu_memory_bytes{model,version} gauge, device memory of a version placed
//                                                   on the GPU; 0 once unloaded
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "server/repository/version_state.h"

namespace mf::server::repository_metrics {

void SetVersionState(const std::string& model, int64_t version, VersionState state);
void RemoveVersion(const std::string& model, int64_t version);
void CountLoadFailure(const std::string& model);
void CountStorageError(const std::string& model);
void ObserveLoadSeconds(const std::string& model, double seconds);
// `device` is Servable::device(); GPU versions also set modelfleet_model_gpu_memory_bytes.
void SetMemoryBytes(const std::string& model, int64_t version, std::string_view device, double bytes);

}  // namespace mf::server::repository_metrics
