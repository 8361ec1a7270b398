// Metrics of dynamic batching, per model (docs/metrics.md):
//   modelfleet_batch_size{model}                 histogram of rows per executed batch (before
//                                                padding): the answer to "is batching working?"
//   modelfleet_batch_padding_rows_total{model}   rows added to reach an allowed batch size
//   modelfleet_queue_latency_seconds{model}      time a request waited for its batch to start
#pragma once

#include <cstdint>
#include <string>

namespace mf::server::batching {

void ObserveBatch(const std::string& model, int64_t rows, int64_t padding_rows);
void ObserveQueueLatency(const std::string& model, double seconds);

}  // namespace mf::server::batching
