// The ONNX backend conformance suite shipped in libonnx-testdata: every test case whose model
// uses only operators (and opset versions) our backend supports must reproduce the stored
// outputs within rtol 1e-3, atol 1e-7. Cases the backend refuses with UNIMPLEMENTED are skipped
// and counted; any other failure to load, run or match fails the test.
// MODELFLEET_TEST_BACKEND=cuda runs the suite on the CUDA backend (FP32; skipped without a GPU)
// and also counts the cases that ran wholly on the GPU and those with CPU-fallback nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/onnx_tensor.h"
#include "runtime/session.h"

namespace mf::runtime {
namespace {

namespace fs = std::filesystem;

const char* const kRoot = "/usr/share/libonnx-testdata/data";
const char* const kSuites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

std::atomic<int> g_passed{0}, g_unsupported{0}, g_all_on_device{0}, g_with_fallback{0};

SessionOptions TestOptions() {
  SessionOptions options;
  const char* backend = std::getenv("MODELFLEET_TEST_BACKEND");
  if (backend && std::string(backend) == "cuda") options.backend = Backend::kCuda;
  return options;
}

std::vector<std::string> CaseDirs() {
  std::vector<std::string> out;
  for (const char* suite : kSuites) {
    fs::path dir = fs::path(kRoot) / suite;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (fs::exists(entry.path() / "model.onnx")) out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Files named <prefix>_<N>.pb in N order.
std::vector<fs::path> Numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix + "_", 0) == 0 && e.path().extension() == ".pb") {
      found.emplace_back(std::stoi(name.substr(prefix.size() + 1)), e.path());
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [n, p] : found) out.push_back(p);
  return out;
}

template <typename T>
double At(const Tensor& t, int64_t i) {
  return static_cast<double>(t.data<T>()[i]);
}

double ElementAsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kFloat32:
      return At<float>(t, i);
    case DataType::kFloat64:
      return At<double>(t, i);
    case DataType::kInt8:
      return At<int8_t>(t, i);
    case DataType::kInt16:
      return At<int16_t>(t, i);
    case DataType::kInt32:
      return At<int32_t>(t, i);
    case DataType::kInt64:
      return At<int64_t>(t, i);
    case DataType::kUInt8:
      return At<uint8_t>(t, i);
    case DataType::kUInt16:
      return At<uint16_t>(t, i);
    case DataType::kUInt32:
      return At<uint32_t>(t, i);
    case DataType::kUInt64:
      return At<uint64_t>(t, i);
    case DataType::kBool:
      return At<bool>(t, i);
    default:
      return NAN;
  }
}

class OnnxConformance : public testing::TestWithParam<std::string> {};

TEST_P(OnnxConformance, MatchesReferenceOutputs) {
  fs::path dir = GetParam();
  const SessionOptions options = TestOptions();
  auto session = Session::Load((dir / "model.onnx").string(), options);
  if (options.backend == Backend::kCuda && !session.ok() && session.status().code() == StatusCode::kUnavailable) {
    GTEST_SKIP() << "no GPU: " << session.status().message();
  }
  if (!session.ok() && session.status().code() == StatusCode::kUnimplemented) {
    ++g_unsupported;
    GTEST_SKIP() << "unsupported: " << session.status().message();
  }
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const Signature& sig = (*session)->signature();
  int datasets = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_directory() || entry.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
    ++datasets;
    SCOPED_TRACE(entry.path().string());
    std::vector<Tensor> inputs;
    for (const fs::path& p : Numbered(entry.path(), "input")) {
      auto t = TensorFromOnnxBytes(ReadFile(p));
      ASSERT_TRUE(t.ok()) << p << ": " << t.status().ToString();
      inputs.push_back(std::move(t).value());
    }
    ASSERT_EQ(inputs.size(), sig.inputs.size());
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : inputs) ptrs.push_back(&t);
    std::vector<Tensor> outputs;
    Status s = (*session)->Run(ptrs, &outputs);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<fs::path> expected_files = Numbered(entry.path(), "output");
    ASSERT_EQ(outputs.size(), expected_files.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      auto expected = TensorFromOnnxBytes(ReadFile(expected_files[k]));
      ASSERT_TRUE(expected.ok()) << expected.status().ToString();
      const Tensor& got = outputs[k];
      ASSERT_EQ(got.dtype(), expected->dtype()) << "output " << k;
      ASSERT_EQ(got.shape(), expected->shape()) << "output " << k;
      int64_t mismatches = 0;
      for (int64_t i = 0; i < got.num_elements(); ++i) {
        double a = ElementAsDouble(got, i), b = ElementAsDouble(*expected, i);
        bool ok = (std::isnan(a) && std::isnan(b)) || a == b || std::fabs(a - b) <= 1e-7 + 1e-3 * std::fabs(b);
        if (!ok && mismatches++ < 5) {
          ADD_FAILURE() << "output " << k << " element " << i << ": got " << a << ", expected " << b;
        }
      }
      EXPECT_EQ(mismatches, 0) << "output " << k;
    }
  }
  EXPECT_GT(datasets, 0);
  if (!HasFailure()) {
    ++g_passed;
    ++((*session)->placement().fallback > 0 ? g_with_fallback : g_all_on_device);
  }
}

std::string CaseName(const testing::TestParamInfo<std::string>& info) {
  fs::path p(info.param);
  std::string name = p.parent_path().filename().string() + "_" + p.filename().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(LibOnnxTestData, OnnxConformance, testing::ValuesIn(CaseDirs()), CaseName);

class CountsReporter : public testing::Environment {
 public:
  void TearDown() override {
    const SessionOptions options = TestOptions();
    std::printf("ONNX conformance (%s): %d passed, %d skipped as unsupported\n",
                std::string(BackendName(options.backend)).c_str(), g_passed.load(), g_unsupported.load());
    if (options.backend == Backend::kCuda) {
      std::printf("ONNX conformance (cuda): %d of the passed ran wholly on the GPU, %d with CPU-fallback nodes\n",
                  g_all_on_device.load(), g_with_fallback.load());
    }
  }
};
[[maybe_unused]] testing::Environment* const kReporter = testing::AddGlobalTestEnvironment(new CountsReporter);

}  // namespace
}  // namespace mf::runtime
