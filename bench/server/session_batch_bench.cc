// Per-row cost of one model run at different batch sizes, on the example digits MLP and on a
// CNN (path from MF_BENCH_CNN, e.g. made by examples/models/make_cnn.py), to show what dynamic
// batching can gain from the runtime: compare rows/s at batch 1 with rows/s at batch N in the
// same run. Also times the batching path itself (BatchingServable around the same model).
//
//   build-server/bench/server/server_session_batch_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>

#include "server/batching/batching_servable.h"
#include "server/session/session_loader.h"

namespace {

using mf::runtime::Tensor;

std::shared_ptr<const mf::server::Servable> Load(const char* path) {
  mf::server::SessionLoader loader(mf::runtime::SessionOptions{}, nullptr);
  auto servable = loader.Load("bench", 1, path);
  if (!servable.ok()) return nullptr;
  return *servable;
}

Tensor Input(const mf::server::Servable& servable, int64_t rows) {
  mf::runtime::Shape shape = servable.signature().inputs[0].shape;
  shape[0] = rows;
  for (auto& d : shape) d = d < 0 ? 1 : d;
  auto t = Tensor::Allocate(mf::runtime::DataType::kFloat32, shape);
  for (int64_t i = 0; i < t->num_elements(); ++i) t->data<float>()[i] = static_cast<float>(i % 16);
  return std::move(t).value();
}

void RunBatches(benchmark::State& state, const char* path) {
  auto servable = Load(path);
  if (!servable) {
    state.SkipWithError("cannot load the model");
    return;
  }
  Tensor input = Input(*servable, state.range(0));
  mf::server::Servable::Outputs outputs;
  for (auto _ : state) {
    if (!servable->Run({&input}, &outputs).ok()) state.SkipWithError("run failed");
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * state.range(0)), benchmark::Counter::kIsRate);
}

void BM_DigitsMlp(benchmark::State& state) { RunBatches(state, "examples/models/digits/2/model.onnx"); }
BENCHMARK(BM_DigitsMlp)->Arg(1)->Arg(8)->Arg(32)->UseRealTime();

void BM_Cnn(benchmark::State& state) {
  const char* path = std::getenv("MF_BENCH_CNN");
  if (path == nullptr) {
    state.SkipWithError("set MF_BENCH_CNN to a CNN model.onnx (examples/models/make_cnn.py)");
    return;
  }
  RunBatches(state, path);
}
BENCHMARK(BM_Cnn)->Arg(1)->Arg(8)->Arg(32)->UseRealTime();

// One request of one row through BatchingServable with a zero timeout: the cost of the queue
// hop (enqueue, wake a batch thread, concat, split, callback) next to BM_DigitsMlp/1.
void BM_DigitsMlpThroughBatcher(benchmark::State& state) {
  auto inner = Load("examples/models/digits/2/model.onnx");
  if (!inner) {
    state.SkipWithError("cannot load the model");
    return;
  }
  mf::server::batching::BatchingOptions options;
  options.batch_timeout = std::chrono::microseconds(0);
  options.num_batch_threads = 1;
  mf::server::batching::BatchingServable batched(inner, std::make_shared<mf::server::batching::BatchScheduler>(options),
                                                 "bench");
  Tensor input = Input(*inner, 1);
  mf::server::Servable::Outputs outputs;
  for (auto _ : state) {
    if (!batched.Run({&input}, &outputs).ok()) state.SkipWithError("run failed");
  }
}
BENCHMARK(BM_DigitsMlpThroughBatcher)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
