// Closed-loop gRPC load generator for TF Serving's PredictionService/Predict: N threads, each
// with its own channel, send one-row digits predictions back to back for a fixed time and record
// every latency. Native so that the client is not the bottleneck (the Python client in
// server_vs_nginx.py is). Prints one line: "rps=<r> p50_ms=<x> p99_ms=<y> errors=<n>".
// With model "@health" it calls grpc.health.v1.Health/Check instead: the same client and
// transport with no model work, i.e. this client's and gRPC's own ceiling.
//
//   grpc_predict_load <host:port> <threads> <seconds> [model (digits) | @health] [input (images)]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

tensorflow::serving::PredictRequest MakeRequest(const std::string& model, const std::string& input) {
  tensorflow::serving::PredictRequest request;
  request.mutable_model_spec()->set_name(model);
  tensorflow::TensorProto& tensor = (*request.mutable_inputs())[input];
  tensor.set_dtype(tensorflow::DT_FLOAT);
  tensor.mutable_tensor_shape()->add_dim()->set_size(1);
  tensor.mutable_tensor_shape()->add_dim()->set_size(64);
  // The same row the REST benchmark posts, (3 * i) % 17, as tensor_content (little-endian
  // floats), the form tf.make_tensor_proto and the Python client send.
  std::string content;
  for (int i = 0; i < 64; ++i) {
    const float value = static_cast<float>((3 * i) % 17);
    content.append(reinterpret_cast<const char*>(&value), sizeof(value));
  }
  tensor.set_tensor_content(std::move(content));
  return request;
}

double Percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const size_t index = std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())));
  return sorted[index];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <host:port> <threads> <seconds> [model] [input]\n", argv[0]);
    return 2;
  }
  const std::string target = argv[1];
  const int threads = std::atoi(argv[2]);
  const int seconds = std::atoi(argv[3]);
  const std::string model = argc > 4 ? argv[4] : "digits";
  const std::string input = argc > 5 ? argv[5] : "images";
  if (threads < 1 || seconds < 1) {
    std::fprintf(stderr, "threads and seconds must be >= 1\n");
    return 2;
  }
  const tensorflow::serving::PredictRequest request = MakeRequest(model, input);
  const bool health_only = model == "@health";

  // Each thread gets its own channel (its own HTTP/2 connection), as wrk gives each client its
  // own TCP connection; channel arguments keep gRPC from sharing one subchannel among them.
  std::vector<std::unique_ptr<tensorflow::serving::PredictionService::Stub>> stubs;
  std::vector<std::unique_ptr<grpc::health::v1::Health::Stub>> health_stubs;
  for (int t = 0; t < threads; ++t) {
    grpc::ChannelArguments args;
    args.SetInt("mf.bench.channel", t);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    stubs.push_back(tensorflow::serving::PredictionService::NewStub(channel));
    health_stubs.push_back(grpc::health::v1::Health::NewStub(channel));
    // Warm-up call: connect before the clock starts, and fail early on a wrong target.
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    tensorflow::serving::PredictResponse response;
    grpc::health::v1::HealthCheckResponse health;
    const grpc::Status status =
        health_only ? health_stubs.back()->Check(&context, grpc::health::v1::HealthCheckRequest(), &health)
                    : stubs.back()->Predict(&context, request, &response);
    if (!status.ok()) {
      std::fprintf(stderr, "warm-up Predict failed: %s\n", status.error_message().c_str());
      return 1;
    }
  }

  std::atomic<long> errors{0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(threads));
  const Clock::time_point begin = Clock::now();
  const Clock::time_point deadline = begin + std::chrono::seconds(seconds);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto& mine = latencies[static_cast<size_t>(t)];
      tensorflow::serving::PredictResponse response;
      const grpc::health::v1::HealthCheckRequest health_request;
      grpc::health::v1::HealthCheckResponse health;
      for (Clock::time_point start = Clock::now(); start < deadline; start = Clock::now()) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        const size_t i = static_cast<size_t>(t);
        const grpc::Status status = health_only ? health_stubs[i]->Check(&context, health_request, &health)
                                                : stubs[i]->Predict(&context, request, &response);
        if (!status.ok() || (!health_only && response.outputs().count("scores") == 0)) {
          errors.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      }
    });
  }
  for (auto& worker : workers) worker.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();

  std::vector<double> all;
  for (auto& mine : latencies) all.insert(all.end(), mine.begin(), mine.end());
  std::sort(all.begin(), all.end());
  std::printf("rps=%.1f p50_ms=%.3f p99_ms=%.3f errors=%ld\n", static_cast<double>(all.size()) / elapsed,
              Percentile(all, 0.50), Percentile(all, 0.99), errors.load());
  return errors.load() == 0 ? 0 : 1;
}
