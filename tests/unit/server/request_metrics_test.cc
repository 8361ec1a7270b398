// Triton's nv_inference_* counters move by exactly what each recorded request, execution and
// queue wait says, next to the modelfleet_* and TF Serving series fed by the same records; and
// MeteredServable / BatchingServable record each execution once, with the rows the requests
// asked for (batch padding excluded).
#include "server/observability/request_metrics.h"

#include <gtest/gtest.h>

#include <future>
#include <sstream>

#include "metrics/metrics.h"
#include "server/batching/batching_servable.h"
#include "server/observability/metered_servable.h"

namespace mf::server {
namespace {

using runtime::DataType;
using runtime::Tensor;

// The value of the sample `name{labels}` (labels exactly as rendered), or 0 when absent.
double Sample(const std::string& name, const std::string& labels) {
  std::istringstream text(metrics::RenderText(*metrics::DefaultRegistry()));
  const std::string prefix = name + "{" + labels + "} ";
  for (std::string line; std::getline(text, line);) {
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(prefix.size()));
  }
  return 0;
}

double Nv(const std::string& name, const std::string& model, int version) {
  return Sample(name, "model=\"" + model + "\",version=\"" + std::to_string(version) + "\"");
}

TEST(TritonMetricsTest, RequestsCountOnlyInferenceOnAResolvedVersion) {
  RecordRequest({"tm_req", 3, "Predict", Entrypoint::kRest, StatusCode::kOk, 0.0025});
  RecordRequest({"tm_req", 3, "ModelInfer", Entrypoint::kGrpc, StatusCode::kOk, 0.0010005});
  RecordRequest({"tm_req", 3, "Predict", Entrypoint::kRest, StatusCode::kInvalidArgument, 0.5});
  RecordRequest({"tm_req", -1, "Predict", Entrypoint::kRest, StatusCode::kNotFound, 0.5});    // no version
  RecordRequest({"tm_req", 3, "GetModelMetadata", Entrypoint::kRest, StatusCode::kOk, 0.5});  // not inference
  EXPECT_EQ(Nv("nv_inference_request_success", "tm_req", 3), 2);
  EXPECT_EQ(Nv("nv_inference_request_failure", "tm_req", 3), 1);
  EXPECT_EQ(Nv("nv_inference_request_duration_us", "tm_req", 3), 2500 + 1000) << "successes, whole µs";
  EXPECT_EQ(Sample("modelfleet_requests_total", "api=\"Predict\",model=\"tm_req\",status=\"NOT_FOUND\",version=\"\""),
            1);
}

TEST(TritonMetricsTest, ExecutionsCountRowsAndChargeComputeToEachRequest) {
  RecordExecution({"tm_exec", 1, 5, 3, true, 0.002});  // a batch of 3 requests, 5 rows
  RecordExecution({"tm_exec", 1, 2, 1, true, 0.001});
  RecordExecution({"tm_exec", 1, 4, 2, false, 0.5});  // failed: its requests count as failures
  EXPECT_EQ(Nv("nv_inference_exec_count", "tm_exec", 1), 2);
  EXPECT_EQ(Nv("nv_inference_count", "tm_exec", 1), 7);
  EXPECT_EQ(Nv("nv_inference_compute_infer_duration_us", "tm_exec", 1), 3 * 2000 + 1000);
  EXPECT_EQ(Sample("modelfleet_compute_latency_seconds_count", "model=\"tm_exec\""), 3) << "every run is timed";
  RecordQueueWait("tm_exec", 1, 0.000250);
  RecordQueueWait("tm_exec", 1, 0.001);
  EXPECT_EQ(Nv("nv_inference_queue_duration_us", "tm_exec", 1), 1250);
  EXPECT_EQ(Sample("modelfleet_queue_latency_seconds_count", "model=\"tm_exec\""), 2);
}

// out = in; fails when the first element is negative.
class EchoServable : public Servable {
 public:
  const runtime::Signature& signature() const override { return signature_; }
  Status Run(const std::vector<const Tensor*>& inputs, Outputs* outputs) const override {
    if (inputs[0]->data<float>()[0] < 0) return InvalidArgument("negative");
    outputs->clear();
    outputs->push_back(inputs[0]->Clone());
    return Status::Ok();
  }
  size_t memory_bytes() const override { return 0; }

 private:
  runtime::Signature signature_;
};

Tensor Rows(int64_t rows, float value) {
  auto t = Tensor::Allocate(DataType::kFloat32, {rows, 2});
  std::fill(t->data<float>(), t->data<float>() + t->num_elements(), value);
  return std::move(t).value();
}

Status RunOne(const Servable& servable, Tensor input) {
  std::vector<Tensor> inputs;
  inputs.push_back(std::move(input));
  std::promise<Status> done;
  servable.RunAsync(std::move(inputs), [&](Status s, Servable::Outputs) { done.set_value(s); }, {});
  return done.get_future().get();
}

TEST(MeteredServableTest, EachRunIsOneExecutionOfTheRequestsRows) {
  MeteredServable metered(std::make_shared<EchoServable>(), "tm_metered", 2);
  ASSERT_TRUE(RunOne(metered, Rows(3, 1)).ok());
  Tensor two = Rows(2, 1);
  Servable::Outputs out;
  ASSERT_TRUE(metered.Run({&two}, &out).ok());
  EXPECT_FALSE(RunOne(metered, Rows(4, -1)).ok());
  EXPECT_EQ(Nv("nv_inference_exec_count", "tm_metered", 2), 2);
  EXPECT_EQ(Nv("nv_inference_count", "tm_metered", 2), 5);
  EXPECT_EQ(Sample("modelfleet_compute_latency_seconds_count", "model=\"tm_metered\""), 3);
}

TEST(MeteredServableTest, RequestRowsIsTheSharedDim0OrOne) {
  std::vector<Tensor> inputs;
  inputs.push_back(Rows(3, 0));
  inputs.push_back(Rows(3, 0));
  EXPECT_EQ(RequestRows(inputs), 3);
  inputs.push_back(Rows(2, 0));
  EXPECT_EQ(RequestRows(inputs), 1);
  EXPECT_EQ(RequestRows(std::vector<Tensor>{}), 1);
}

TEST(BatchingMetricsTest, ABatchIsOneExecutionOfItsRequestsRowsWithoutPadding) {
  batching::BatchingOptions options;
  options.max_batch_size = 8;
  options.allowed_batch_sizes = {8};
  options.batch_timeout = std::chrono::microseconds(0);
  options.num_batch_threads = 1;
  batching::BatchingServable servable(std::make_shared<EchoServable>(),
                                      std::make_shared<batching::BatchScheduler>(options), "tm_batch", 4);
  ASSERT_TRUE(RunOne(servable, Rows(3, 1)).ok());   // padded to 8 rows, 3 of them inferences
  ASSERT_TRUE(RunOne(servable, Rows(20, 1)).ok());  // larger than any batch: runs alone, metered
  EXPECT_EQ(Nv("nv_inference_exec_count", "tm_batch", 4), 2);
  EXPECT_EQ(Nv("nv_inference_count", "tm_batch", 4), 23);
  EXPECT_EQ(Sample("modelfleet_queue_latency_seconds_count", "model=\"tm_batch\""), 1) << "only the batched one queued";
}

}  // namespace
}  // namespace mf::server
