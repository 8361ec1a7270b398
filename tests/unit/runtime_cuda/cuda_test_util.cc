#include "cuda_test_util.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>

namespace mf::runtime::testing {

bool GpuAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

Tensor RandomFloats(const Shape& shape, uint32_t seed, float lo, float hi) {
  Tensor t = Tensor::AllocateUninitialized(DataType::kFloat32, shape).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor Int64s(const Shape& shape, const std::vector<int64_t>& values) {
  Tensor t = Tensor::AllocateUninitialized(DataType::kInt64, shape).value();
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), values.size());
  std::memcpy(t.raw_data(), values.data(), t.byte_size());
  return t;
}

Tensor Floats(const Shape& shape, const std::vector<float>& values) {
  Tensor t = Tensor::AllocateUninitialized(DataType::kFloat32, shape).value();
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), values.size());
  std::memcpy(t.raw_data(), values.data(), t.byte_size());
  return t;
}

std::unique_ptr<Session> LoadCuda(const std::string& model) {
  SessionOptions options;
  options.backend = Backend::kCuda;
  auto s = Session::LoadFromBytes(model, "", options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

Tolerance ToleranceFor(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return {1e-4, 1e-5};
    case Precision::kTf32:
      return {5e-3, 5e-3};
    default:
      return {3e-2, 3e-2};
  }
}

namespace {

double ElementAsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kFloat32:
      return t.data<float>()[i];
    case DataType::kFloat64:
      return t.data<double>()[i];
    case DataType::kInt32:
      return t.data<int32_t>()[i];
    case DataType::kInt64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DataType::kInt8:
      return t.data<int8_t>()[i];
    case DataType::kUInt8:
      return t.data<uint8_t>()[i];
    case DataType::kBool:
      return t.data<bool>()[i];
    default:
      ADD_FAILURE() << "unexpected output type " << DataTypeName(t.dtype());
      return 0;
  }
}

bool IsFloat(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16; }

}  // namespace

void ExpectCudaMatchesCpu(const std::string& model, const std::vector<const Tensor*>& inputs, Precision precision,
                          Tolerance tolerance) {
  SessionOptions cpu_options;
  auto cpu = Session::LoadFromBytes(model, "", cpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  SessionOptions cuda_options;
  cuda_options.backend = Backend::kCuda;
  cuda_options.precision = precision;
  auto cuda = Session::LoadFromBytes(model, "", cuda_options);
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();

  std::vector<Tensor> expected;
  ASSERT_TRUE((*cpu)->Run(inputs, &expected).ok());
  for (int round = 0; round < 3; ++round) {
    std::vector<Tensor> actual;
    Status s = (*cuda)->Run(inputs, &actual);
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t o = 0; o < expected.size(); ++o) {
      const Tensor& e = expected[o];
      const Tensor& a = actual[o];
      ASSERT_EQ(a.location(), Location::kHost);
      ASSERT_EQ(a.dtype(), e.dtype()) << "output " << o;
      ASSERT_EQ(a.shape(), e.shape()) << "output " << o;
      int failures = 0;
      for (int64_t i = 0; i < e.num_elements() && failures < 10; ++i) {
        double x = ElementAsDouble(a, i), y = ElementAsDouble(e, i);
        bool ok =
            IsFloat(e.dtype())
                ? (std::isnan(y) ? std::isnan(x) : std::fabs(x - y) <= tolerance.atol + tolerance.rtol * std::fabs(y))
                : x == y;
        if (!ok) {
          ++failures;
          ADD_FAILURE() << "round " << round << " output " << o << " element " << i << ": cuda " << x << " cpu " << y;
        }
      }
    }
  }
}

}  // namespace mf::runtime::testing
