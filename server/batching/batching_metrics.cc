#include "server/batching/batching_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>

#include "metrics/metrics.h"

namespace mf::server::batching {
namespace {

struct Families {
  prometheus::Family<prometheus::Histogram>& batch_size;
  prometheus::Family<prometheus::Counter>& padding_rows;
  prometheus::Family<prometheus::Counter>& skipped;
  prometheus::Counter& tf_wrapped_runs;
};

Families& Get() {
  static Families* families = [] {
    auto& registry = *metrics::DefaultRegistry();
    return new Families{
        prometheus::BuildHistogram()
            .Name("modelfleet_batch_size")
            .Help("Requests' rows per executed batch, before padding")
            .Register(registry),
        prometheus::BuildCounter()
            .Name("modelfleet_batch_padding_rows_total")
            .Help("Rows added to batches to reach an allowed batch size")
            .Register(registry),
        prometheus::BuildCounter()
            .Name("modelfleet_batch_skipped_requests_total")
            .Help("Queued requests answered without being run: their caller gave up (deadline, cancellation) "
                  "before their batch ran")
            .Register(registry),
        prometheus::BuildCounter()
            .Name(":tensorflow:serving:batching_session:wrapped_run_count")
            .Help("Total count of run calls on the wrapped session (TF Serving's name): executed batches")
            .Register(registry)
            .Add({}),
    };
  }();
  return *families;
}

}  // namespace

void ObserveBatch(const std::string& model, int64_t rows, int64_t padding_rows) {
  Get().batch_size.Add({{"model", model}}, metrics::ExponentialBuckets(1, 2, 12)).Observe(static_cast<double>(rows));
  Get().tf_wrapped_runs.Increment();
  if (padding_rows > 0) {
    Get().padding_rows.Add({{"model", model}}).Increment(static_cast<double>(padding_rows));
  }
}

void CountSkippedRequest(const std::string& model, const std::string& reason) {
  Get().skipped.Add({{"model", model}, {"reason", reason}}).Increment();
}

}  // namespace mf::server::batching
