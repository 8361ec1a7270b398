// TF Serving REST predict bodies: our simdjson-based codec against nlohmann::json doing the same
// job (parse the body, check it is rectangular, copy the floats out; or build the response).
// Bytes/s are body bytes. Run: build-<you>/bench/codec/codec_rest_json_bench
#include <benchmark/benchmark.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/codec/kserve_json.h"
#include "server/codec/rest_predict.h"

namespace {

using mf::codec::ModelSignature;
using mf::runtime::DataType;

constexpr int kRows = 1000;
constexpr int kCols = 784;  // one MNIST image per row

std::vector<float> RandomFloats() {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(kRows) * kCols);
  for (auto& v : values) v = dist(rng);
  return values;
}

std::string RequestBody(const std::vector<float>& values) {
  std::string body = "{\"instances\": [";
  char buf[32];
  for (int r = 0; r < kRows; ++r) {
    body += r ? ",[" : "[";
    for (int c = 0; c < kCols; ++c) {
      if (c) body.push_back(',');
      auto res = std::to_chars(buf, buf + sizeof(buf), values[static_cast<size_t>(r) * kCols + c]);
      body.append(buf, res.ptr);
    }
    body.push_back(']');
  }
  body += "]}";
  return body;
}

std::vector<ModelSignature> Signatures() {
  ModelSignature sig;
  sig.inputs = {{"x", DataType::kFloat32, {-1, kCols}}};
  return {sig};
}

void BM_ParseInstances_ModelFleet(benchmark::State& state) {
  const std::string body = RequestBody(RandomFloats());
  const auto signatures = Signatures();
  for (auto _ : state) {
    auto request = mf::codec::ParseRestPredictRequest(body, signatures);
    if (!request.ok()) state.SkipWithError(request.status().ToString().c_str());
    benchmark::DoNotOptimize(request);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
}

// The peer: a DOM parse with nlohmann::json, then the same rectangularity check and copy.
void BM_ParseInstances_Nlohmann(benchmark::State& state) {
  const std::string body = RequestBody(RandomFloats());
  for (auto _ : state) {
    auto doc = nlohmann::json::parse(body);
    const auto& instances = doc.at("instances");
    std::vector<float> values;
    values.reserve(instances.size() * kCols);
    for (const auto& row : instances) {
      if (!row.is_array() || row.size() != kCols) throw std::runtime_error("ragged");
      for (const auto& v : row) values.push_back(v.get<float>());
    }
    benchmark::DoNotOptimize(values);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
}

// KServe v2 JSON with the same floats nested the same way.
void BM_ParseV2Infer_ModelFleet(benchmark::State& state) {
  std::string body = RequestBody(RandomFloats());
  body.replace(0, body.find('[') + 1,
               "{\"inputs\": [{\"name\": \"x\", \"shape\": [1000, 784], \"datatype\": \"FP32\", \"data\": [");
  body.replace(body.size() - 2, 2, "]}]}");
  for (auto _ : state) {
    auto request = mf::codec::ParseV2InferRequest(body, std::nullopt);
    if (!request.ok()) state.SkipWithError(request.status().ToString().c_str());
    benchmark::DoNotOptimize(request);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
}

mf::runtime::Tensor OutputTensor() {
  auto values = RandomFloats();
  auto tensor = mf::runtime::Tensor::FromBytes(
      DataType::kFloat32, {kRows, kCols},
      std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return std::move(tensor).value();
}

void BM_WritePredictions_ModelFleet(benchmark::State& state) {
  const auto tensor = OutputTensor();
  std::vector<mf::codec::NamedTensorView> outputs = {{"y", &tensor}};
  size_t bytes = 0;
  for (auto _ : state) {
    std::string body;
    auto status = mf::codec::WriteRestPredictResponse(mf::codec::RestFormat::kRow, outputs, &body);
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    bytes = body.size();
    benchmark::DoNotOptimize(body);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BM_WritePredictions_Nlohmann(benchmark::State& state) {
  const auto tensor = OutputTensor();
  const float* data = tensor.data<float>();
  size_t bytes = 0;
  for (auto _ : state) {
    nlohmann::json rows = nlohmann::json::array();
    for (int r = 0; r < kRows; ++r) {
      rows.push_back(
          std::vector<float>(data + static_cast<size_t>(r) * kCols, data + static_cast<size_t>(r + 1) * kCols));
    }
    std::string body = nlohmann::json{{"predictions", std::move(rows)}}.dump();
    bytes = body.size();
    benchmark::DoNotOptimize(body);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

BENCHMARK(BM_ParseInstances_ModelFleet)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ParseInstances_Nlohmann)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ParseV2Infer_ModelFleet)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_WritePredictions_ModelFleet)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_WritePredictions_Nlohmann)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
