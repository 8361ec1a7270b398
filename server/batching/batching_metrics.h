// Metrics of dynamic batching, per model (docs/metrics.md):
//   modelfleet_batch_size{model}                 histogram of rows per executed batch (before
//                                                padding): the answer to "is batching working?"
//   modelfleet_batch_padding_rows_total{model}   rows added to reach an allowed batch size
//   modelfleet_batch_skipped_requests_total{model, reason}
//                                                queued requests whose caller gave up (deadline,
//                                                cancellation) before their batch ran: answered
//                                                without being run
//   :tensorflow:serving:batching_session:wrapped_run_count   executed batches (TF Serving's name)
// A request's queue wait and a batch's execution are request metrics (request_metrics.h).
#pragma once

#include <cstdint>
#include <string>

namespace mf::server::batching {

void ObserveBatch(const std::string& model, int64_t rows, int64_t padding_rows);
// `reason`: the status code's name the skipped request was answered with.
void CountSkippedRequest(const std::string& model, const std::string& reason);

}  // namespace mf::server::batching
