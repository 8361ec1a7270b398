// The CUDA executor itself (cuda_plan.cc): placement, CUDA-graph replay across input
// signatures, inputs read on the host, CPU fallback, concurrent runs, FP16 boundaries, and a bad
// input that must leave the session usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "cuda_test_util.h"
#include "runtime/cuda/pinned_host.h"
#include "runtime/session.h"
#include "tests/unit/runtime/model_builder.h"

namespace mf::runtime::testing {
namespace {

using onnx::TensorProto;

std::unique_ptr<Session> Load(const std::string& model, Backend backend, Precision precision = Precision::kFp32) {
  SessionOptions options;
  options.backend = backend;
  options.precision = precision;
  auto s = Session::LoadFromBytes(model, "", options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::vector<Tensor> RunOk(const Session& s, const std::vector<const Tensor*>& inputs) {
  std::vector<Tensor> out;
  Status st = s.Run(inputs, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

void ExpectNear(const Tensor& a, const Tensor& b, double tol) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), DataType::kFloat32);
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], tol * (1 + std::abs(b.data<float>()[i]))) << "element " << i;
  }
}

// x [batch, 16] -> MatMul W [16, 8] -> Relu -> Reshape to [batch, 2, 4] via a shape computed from
// Shape(x): the export pattern that puts shape arithmetic on the host.
std::string MlpWithShapeArithmetic() {
  ModelBuilder b(13);
  b.Input("x", {-1, 16}).Output("y", {-1, 2, 4});
  b.Initializer("w", {16, 8}, std::vector<float>(128, 0.05f));
  b.Node("MatMul", {"x", "w"}, {"h"});
  b.Node("Relu", {"h"}, {"r"});
  b.Node("Shape", {"x"}, {"xs"});
  b.Int64Initializer("zero", {1}, {0});
  auto* g = b.Node("Gather", {"xs", "zero"}, {"batch"});
  ModelBuilder::IntAttr(g, "axis", 0);
  b.Int64Initializer("tail", {2}, {2, 4});
  auto* c = b.Node("Concat", {"batch", "tail"}, {"shape"});
  ModelBuilder::IntAttr(c, "axis", 0);
  b.Node("Reshape", {"r", "shape"}, {"y"});
  return b.Serialize();
}

TEST(CudaExecutor, ShapeArithmeticRunsOnTheHostAndSignaturesReplay) {
  MF_SKIP_WITHOUT_GPU();
  std::string model = MlpWithShapeArithmetic();
  auto cpu = Load(model, Backend::kCpu);
  auto gpu = Load(model, Backend::kCuda);
  ASSERT_TRUE(cpu && gpu);
  EXPECT_EQ(gpu->placement().fallback, 0);
  EXPECT_GE(gpu->placement().host, 3);    // Shape, Gather, Concat
  EXPECT_GE(gpu->placement().device, 2);  // MatMul (+ fused Relu), Reshape
  // Alternate batch sizes so each signature goes eager -> captured -> replayed, interleaved.
  for (int round = 0; round < 4; ++round) {
    for (int64_t batch : {1, 7, 32}) {
      Tensor x = RandomFloats({batch, 16}, static_cast<uint32_t>(batch * 10 + round));
      auto want = RunOk(*cpu, {&x});
      auto got = RunOk(*gpu, {&x});
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].shape(), (Shape{batch, 2, 4}));
      ExpectNear(got[0], want[0], 1e-5);
    }
  }
}

TEST(CudaExecutor, AGraphInputReadOnTheHostIsPartOfTheSignature) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(13);
  b.Input("x", {2, 12}).Input("shape", {3}, TensorProto::INT64).Output("y");
  b.Node("Neg", {"x"}, {"n"});
  b.Node("Reshape", {"n", "shape"}, {"y"});
  auto gpu = Load(b.Serialize(), Backend::kCuda);
  ASSERT_TRUE(gpu);
  Tensor x = RandomFloats({2, 12}, 3);
  // Same input shapes, different shape values: each must be honoured on every replay.
  for (int round = 0; round < 3; ++round) {
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{4, 3, 2}}) {
      Tensor shape = Int64s({3}, dims);
      auto got = RunOk(*gpu, {&x, &shape});
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].shape(), (Shape{dims[0], dims[1], dims[2]}));
      for (int64_t i = 0; i < 24; ++i) ASSERT_EQ(got[0].data<float>()[i], -x.data<float>()[i]);
    }
  }
}

TEST(CudaExecutor, ConcurrentRunsMatchSerialRuns) {
  MF_SKIP_WITHOUT_GPU();
  std::string model = MlpWithShapeArithmetic();
  auto cpu = Load(model, Backend::kCpu);
  auto gpu = Load(model, Backend::kCuda);
  ASSERT_TRUE(cpu && gpu);
  constexpr int kThreads = 8;
  std::vector<Tensor> inputs, expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(RandomFloats({1 + t % 3, 16}, static_cast<uint32_t>(100 + t)));
    expected.push_back(std::move(RunOk(*cpu, {&inputs.back()})[0]));
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::vector<Tensor> out;
        Status s = gpu->Run({&inputs[static_cast<size_t>(t)]}, &out);
        if (!s.ok() || out.size() != 1 || out[0].shape() != expected[static_cast<size_t>(t)].shape()) {
          ++mismatches[static_cast<size_t>(t)];
          continue;
        }
        for (int64_t k = 0; k < out[0].num_elements(); ++k) {
          if (std::abs(out[0].data<float>()[k] - expected[static_cast<size_t>(t)].data<float>()[k]) > 1e-4f) {
            ++mismatches[static_cast<size_t>(t)];
            break;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[static_cast<size_t>(t)], 0) << "thread " << t;
}

TEST(CudaExecutor, CpuFallbackNodesAreCountedAndCorrect) {
  MF_SKIP_WITHOUT_GPU();
  // Resize in cubic mode has no CUDA kernel: it must run on the CPU between two GPU nodes.
  ModelBuilder b(13);
  b.Input("x", {1, 2, 4, 4}).Output("y");
  b.Node("Relu", {"x"}, {"r"});
  b.Initializer("scales", {4}, {1.f, 1.f, 2.f, 2.f});
  b.Initializer("roi", {0}, {});
  auto* n = b.Node("Resize", {"r", "roi", "scales"}, {"z"});
  auto* mode = n->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("cubic");
  b.Node("Neg", {"z"}, {"y"});
  auto gpu = Load(b.Serialize(), Backend::kCuda);
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->placement().fallback, 1);
  ASSERT_EQ(gpu->placement().fallback_ops, std::vector<std::string>{"Resize"});
  Tensor x = RandomFloats({1, 2, 4, 4}, 9);
  ExpectCudaMatchesCpu(b.Serialize(), {&x});
}

TEST(CudaExecutor, Fp16KeepsFloat32AtTheBoundaries) {
  MF_SKIP_WITHOUT_GPU();
  std::string model = MlpWithShapeArithmetic();
  auto gpu = Load(model, Backend::kCuda, Precision::kFp16);
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->signature().inputs[0].dtype, DataType::kFloat32);
  Tensor x = RandomFloats({4, 16}, 5);
  ExpectCudaMatchesCpu(model, {&x}, Precision::kFp16, ToleranceFor(Precision::kFp16));
}

TEST(CudaExecutor, ABadRunLeavesTheSessionUsable) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(13);
  b.Input("x", {-1, 12}).Input("shape", {2}, TensorProto::INT64).Output("y");
  b.Node("Relu", {"x"}, {"r"});
  b.Node("Reshape", {"r", "shape"}, {"y"});
  auto gpu = Load(b.Serialize(), Backend::kCuda);
  ASSERT_TRUE(gpu);
  Tensor x = RandomFloats({2, 12}, 1);
  Tensor bad = Int64s({2}, {5, 5});
  Tensor good = Int64s({2}, {4, 6});
  for (int i = 0; i < 3; ++i) {
    std::vector<Tensor> out;
    Status s = gpu->Run({&x, &bad}, &out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    auto ok = RunOk(*gpu, {&x, &good});
    ASSERT_EQ(ok.size(), 1u);
    EXPECT_EQ(ok[0].shape(), (Shape{4, 6}));
  }
}

TEST(CudaExecutor, WithoutAGpuLoadIsUnavailable) {
  if (GpuAvailable()) GTEST_SKIP() << "this machine has a GPU";
  SessionOptions options;
  options.backend = Backend::kCuda;
  auto s = Session::LoadFromBytes(MlpWithShapeArithmetic(), "", options);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().ToString();
}

// Inputs assembled in AllocateInput's page-locked memory run like any other host tensor, and the
// buffer goes back to the cache for the next input of its size.
TEST(CudaExecutor, AllocateInputGivesReusedPageLockedHostTensors) {
  MF_SKIP_WITHOUT_GPU();
  auto gpu = Load(MlpWithShapeArithmetic(), Backend::kCuda);
  auto cpu = Load(MlpWithShapeArithmetic(), Backend::kCpu);
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(cpu, nullptr);
  Tensor plain = RandomFloats({6, 16}, 7);
  const size_t cached_before = cuda::CachedPinnedBytes();
  for (int round = 0; round < 3; ++round) {  // eager, captured, replayed
    auto staged = gpu->AllocateInput(DataType::kFloat32, {6, 16});
    ASSERT_TRUE(staged.ok()) << staged.status().ToString();
    ASSERT_EQ(staged->location(), Location::kHost);
    cudaPointerAttributes attributes{};
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, staged->raw_data()), cudaSuccess);
    EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "not page-locked";
    std::memcpy(staged->raw_data(), plain.raw_data(), plain.byte_size());
    ExpectNear(RunOk(*gpu, {&*staged})[0], RunOk(*cpu, {&plain})[0], 1e-5);
  }
  // Released tensors are cached by size and handed out again instead of allocating.
  const size_t cached = cuda::CachedPinnedBytes();
  EXPECT_EQ(cached, cached_before + 6 * 16 * sizeof(float));
  {
    auto again = gpu->AllocateInput(DataType::kFloat32, {16, 6});
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(cuda::CachedPinnedBytes(), cached - 6 * 16 * sizeof(float));
  }
  EXPECT_EQ(cuda::CachedPinnedBytes(), cached);
  EXPECT_EQ(gpu->AllocateInput(DataType::kFloat32, {-1, 16}).status().code(), StatusCode::kInvalidArgument);
  auto on_cpu = cpu->AllocateInput(DataType::kFloat32, {6, 16});
  ASSERT_TRUE(on_cpu.ok());
  EXPECT_EQ(on_cpu->location(), Location::kHost);
}

// --gpu_memory_fraction: a load or a run beyond the cap fails with RESOURCE_EXHAUSTED, and what
// was loaded keeps running.
TEST(CudaExecutor, GpuMemoryFractionRefusesLoadsAndRunsBeyondIt) {
  MF_SKIP_WITHOUT_GPU();
  auto small = Load(MlpWithShapeArithmetic(), Backend::kCuda);
  ASSERT_NE(small, nullptr);
  Tensor x = RandomFloats({4, 16}, 3);
  RunOk(*small, {&x});
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  const size_t headroom = size_t{4} << 20;
  const double fraction = static_cast<double>(GpuMemoryInUse(0) + headroom) / static_cast<double>(total_bytes);
  ASSERT_TRUE(SetGpuMemoryFraction(0, fraction).ok());

  ModelBuilder big(13);  // 64 MiB of weights
  big.Input("x", {-1, 4096}).Output("y", {-1, 4096});
  big.Initializer("w", {4096, 4096}, std::vector<float>(size_t{4096} * 4096, 0.01f));
  big.Node("MatMul", {"x", "w"}, {"y"});
  SessionOptions options;
  options.backend = Backend::kCuda;
  auto refused = Session::LoadFromBytes(big.Serialize(), "", options);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("--gpu_memory_fraction"), std::string::npos);

  Tensor huge = RandomFloats({200000, 16}, 4);  // 12 MiB in, more in activations
  std::vector<Tensor> out;
  Status s = small->Run({&huge}, &out);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  for (int i = 0; i < 3; ++i) RunOk(*small, {&x});  // eager, captured, replayed: still fine

  ASSERT_TRUE(SetGpuMemoryFraction(0, 0).ok());  // lifted: the same run fits
  EXPECT_TRUE(small->Run({&huge}, &out).ok());
  EXPECT_EQ(SetGpuMemoryFraction(0, 1.5).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mf::runtime::testing
