// Loading a model never holds its weights twice: the file is parsed as a stream (its bytes are
// never held whole next to the parsed message), each initializer's data leaves the ModelProto
// as it enters the graph (the proto's pages handed back as they are copied), external data is
// read straight into the tensor, and a conv's plain weights go as it packs them. Peak RSS is
// measured through VmHWM, reset before each load.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>

#include "runtime/onnx_tensor.h"
#include "runtime/session.h"
#include "tests/unit/runtime/model_builder.h"

namespace mf::runtime {
namespace {

using testing::ModelBuilder;

constexpr int64_t kRows = 2048, kCols = 2048;  // a 16 MiB float32 weight
constexpr size_t kWeightBytes = static_cast<size_t>(kRows * kCols) * sizeof(float);

size_t StatusKib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoul(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

// Peak resident bytes above the current RSS while `fn` runs; nullopt where VmHWM cannot be
// reset (a kernel without clear_refs, or a sanitizer's shadow memory).
template <typename Fn>
std::optional<size_t> PeakGrowth(Fn fn) {
  // Free heap pages left by earlier tests would otherwise absorb this load's allocations.
  malloc_trim(0);
  std::ofstream clear("/proc/self/clear_refs");
  if (!clear || !(clear << "5" << std::flush)) return std::nullopt;
  const size_t before = StatusKib("VmRSS");
  if (StatusKib("VmHWM") > before + (size_t{1} << 20)) return std::nullopt;  // reset did not take
  fn();
  const size_t peak = StatusKib("VmHWM");
  return peak > before ? peak - before : 0;
}

std::string WeightBytes() {
  std::vector<float> w(static_cast<size_t>(kRows * kCols));
  std::iota(w.begin(), w.end(), 0.0f);
  for (float& v : w) v = std::fmod(v, 7.0f) * 0.125f;
  return std::string(reinterpret_cast<const char*>(w.data()), kWeightBytes);
}

// y = x . W with W [kRows, kCols]: the output is small, so the warm-up run adds little.
ModelBuilder MatMulModel() {
  ModelBuilder b;
  b.Input("x", {1, kRows}).Output("y");
  b.Node("MatMul", {"x", "w"}, {"y"}, "matmul");
  return b;
}

onnx::TensorProto* AddWeight(ModelBuilder& b) {
  auto* t = b.graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(kRows);
  t->add_dims(kCols);
  return t;
}

class LoadMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mf_load_memory_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return (dir_ / name).string();
  }

  // Runs the loaded model on x = e_0 (selects W's first row) and checks it.
  static void ExpectFirstRow(const Session& s, const std::string& weights) {
    auto x = Tensor::Allocate(DataType::kFloat32, {1, kRows});
    ASSERT_TRUE(x.ok());
    x->data<float>()[0] = 1.0f;
    std::vector<Tensor> out;
    ASSERT_TRUE(s.Run({&*x}, &out).ok());
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].shape(), (Shape{1, kCols}));
    const auto* w = reinterpret_cast<const float*>(weights.data());
    for (int64_t j = 0; j < kCols; j += 97) EXPECT_EQ(out[0].data<float>()[j], w[j]) << j;
  }

  std::filesystem::path dir_;
};

TEST_F(LoadMemoryTest, ModelFileLoadNeverHoldsTheWeightsTwice) {
  const std::string weights = WeightBytes();
  ModelBuilder b = MatMulModel();
  AddWeight(b)->set_raw_data(weights);
  const std::string path = Write("model.onnx", b.Serialize());

  StatusOr<std::unique_ptr<Session>> session = Unavailable("not loaded");
  auto growth = PeakGrowth([&] { session = Session::Load(path, SessionOptions{}); });
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ExpectFirstRow(**session, weights);
  if (!growth) GTEST_SKIP() << "VmHWM cannot be reset here";
  // Holding the file's bytes, the parsed proto and the graph's copy together would be 3x; the
  // proto's copy and the graph's for one tensor at a time, 2x. The proto's pages go back as
  // they are copied: 1x plus a slice.
  EXPECT_LT(*growth, kWeightBytes * 3 / 2)
      << "peak grew by " << (*growth >> 20) << " MiB for " << (kWeightBytes >> 20) << " MiB of weights";
}

TEST_F(LoadMemoryTest, ExternalDataGoesStraightIntoTheTensor) {
  const std::string weights = WeightBytes();
  Write("weights.bin", weights);
  ModelBuilder b = MatMulModel();
  auto* t = AddWeight(b);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* location = t->add_external_data();
  location->set_key("location");
  location->set_value("weights.bin");
  const std::string path = Write("model.onnx", b.Serialize());

  StatusOr<std::unique_ptr<Session>> session = Unavailable("not loaded");
  auto growth = PeakGrowth([&] { session = Session::Load(path, SessionOptions{}); });
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ExpectFirstRow(**session, weights);
  if (!growth) GTEST_SKIP() << "VmHWM cannot be reset here";
  // Read into a string and then copied would be 2x.
  EXPECT_LT(*growth, kWeightBytes * 3 / 2)
      << "peak grew by " << (*growth >> 20) << " MiB for " << (kWeightBytes >> 20) << " MiB of weights";
}

TEST_F(LoadMemoryTest, TheProtosCopyDoesNotStayResidentAfterTheLoad) {
  // Serve every block from the heap, as glibc does once its adaptive mmap threshold has risen
  // past the model's tensors (after the first swap in a server): a freed block below a live one
  // then stays resident unless the loader hands its pages back.
  ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 32 << 20), 1);
  const std::string weights = WeightBytes();
  ModelBuilder b = MatMulModel();
  AddWeight(b)->set_raw_data(weights);
  const std::string path = Write("model.onnx", b.Serialize());
  malloc_trim(0);
  const size_t before = StatusKib("VmRSS");
  auto session = Session::Load(path, SessionOptions{});
  const size_t after = StatusKib("VmRSS");
  ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 128 << 10), 1);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ExpectFirstRow(**session, weights);
  // The graph's copy of the weights plus small change; the proto's copy would make it 2x.
  EXPECT_LT(after - std::min(after, before), kWeightBytes * 3 / 2)
      << "RSS grew by " << ((after - before) >> 20) << " MiB for " << (kWeightBytes >> 20) << " MiB of weights";
}

// A CPU conv reorders constant weights into oneDNN's layout when it first runs (the warm-up);
// the graph's plain copy goes as it is packed, so a loaded conv model holds its weights once,
// not twice, even while loading, and memory_bytes() counts the packed copy.
TEST_F(LoadMemoryTest, ConvWeightsAreHeldOncePackedNotAlsoPlain) {
  // [M=1024, C=1024, 2, 2]: 16 MiB of float32 weights over a tiny input.
  constexpr int64_t kChannels = 1024;
  ModelBuilder b;
  b.Input("x", {-1, kChannels, 2, 2}).Output("y");
  b.Node("Conv", {"x", "w"}, {"y"}, "conv");
  auto* t = b.graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {kChannels, kChannels, int64_t{2}, int64_t{2}}) t->add_dims(d);
  const std::string weights = WeightBytes();
  t->set_raw_data(weights);
  const std::string path = Write("model.onnx", b.Serialize());
  // A first load pays the process's one-time costs (oneDNN's JIT kernels, OpenMP's threads).
  ASSERT_TRUE(Session::Load(path, SessionOptions{}).ok());
  malloc_trim(0);
  const size_t before = StatusKib("VmRSS");
  StatusOr<std::unique_ptr<Session>> session = Unavailable("not loaded");
  auto growth = PeakGrowth([&] { session = Session::Load(path, SessionOptions{}); });
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  malloc_trim(0);
  const size_t after = StatusKib("VmRSS");
  // Parsing copies the proto's bytes into the graph and packing reorders the graph's copy, each
  // handing the source's pages back slice by slice: never two whole copies (2x).
  if (growth) {
    EXPECT_LT(*growth, kWeightBytes * 3 / 2)
        << "load peak grew by " << (*growth >> 20) << " MiB for " << (kWeightBytes >> 20) << " MiB of weights";
  }
  EXPECT_GE((*session)->memory_bytes(), kWeightBytes);
  EXPECT_LT((*session)->memory_bytes(), kWeightBytes * 5 / 4);
  EXPECT_LT(after - std::min(after, before), kWeightBytes * 3 / 2)
      << "RSS grew by " << ((after - before) >> 20) << " MiB for " << (kWeightBytes >> 20) << " MiB of weights";
  // Still right at another batch size (its weights layout comes from the packed copy): output
  // channel m of a one-hot input at (c=0, 0, 0) is w[m, 0, 0, 0].
  auto x = Tensor::Allocate(DataType::kFloat32, {3, kChannels, 2, 2});
  ASSERT_TRUE(x.ok());
  for (int64_t n = 0; n < 3; ++n) x->data<float>()[n * kChannels * 4] = 1.0f;
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({&*x}, &out).ok());
  ASSERT_EQ(out[0].shape(), (Shape{3, kChannels, 1, 1}));
  const auto* w = reinterpret_cast<const float*>(weights.data());
  for (int64_t n = 0; n < 3; ++n) {
    for (int64_t m = 0; m < kChannels; m += 61) {
      EXPECT_EQ(out[0].data<float>()[n * kChannels + m], w[m * kChannels * 4]) << n << " " << m;
    }
  }
}

// With several convs, each one's plain weights go as soon as it has packed them in the warm-up:
// the load never holds all the weights twice (plain and packed), only one conv's.
TEST_F(LoadMemoryTest, ConvLoadPeakHoldsOneConvsWeightsTwiceNotAll) {
  // Four 1x1 convs 1024 -> 1024: 4 MiB of float32 weights each, 16 MiB in all.
  constexpr int64_t kChannels = 1024;
  ModelBuilder b;
  b.Input("x", {-1, kChannels, 1, 1}).Output("y3");
  const std::string weights = WeightBytes();
  const size_t per_conv = kWeightBytes / 4;
  for (int i = 0; i < 4; ++i) {
    const std::string w = "w" + std::to_string(i);
    b.Node("Conv", {i == 0 ? "x" : "y" + std::to_string(i - 1), w}, {"y" + std::to_string(i)},
           "conv" + std::to_string(i));
    auto* t = b.graph()->add_initializer();
    t->set_name(w);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {kChannels, kChannels, int64_t{1}, int64_t{1}}) t->add_dims(d);
    t->set_raw_data(weights.substr(static_cast<size_t>(i) * per_conv, per_conv));
  }
  const std::string path = Write("model.onnx", b.Serialize());
  // A first load pays the process's one-time costs (oneDNN's JIT kernels, OpenMP's threads).
  ASSERT_TRUE(Session::Load(path, SessionOptions{}).ok());
  StatusOr<std::unique_ptr<Session>> session = Unavailable("not loaded");
  auto growth = PeakGrowth([&] { session = Session::Load(path, SessionOptions{}); });
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  if (!growth) GTEST_SKIP() << "VmHWM cannot be reset here";
  // All the weights plus one conv's second copy is 1.25x; both copies of all of them, 2x.
  EXPECT_LT(*growth, kWeightBytes * 3 / 2)
      << "peak grew by " << (*growth >> 20) << " MiB for " << (kWeightBytes >> 20) << " MiB of weights";
}

TEST_F(LoadMemoryTest, TruncatedModelFileIsRefusedAsInvalid) {
  ModelBuilder b = MatMulModel();
  AddWeight(b)->set_raw_data(WeightBytes());
  const std::string whole = b.Serialize();
  // The initializer's length prefix now claims far more bytes than the file holds.
  const std::string path = Write("model.onnx", whole.substr(0, whole.size() / 3));
  auto s = Session::Load(path, SessionOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status().ToString();
  EXPECT_NE(s.status().message().find("model.onnx"), std::string::npos) << s.status().message();
}

TEST_F(LoadMemoryTest, ADirectoryIsNotAModelFile) {
  auto s = Session::Load(dir_.string(), SessionOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound) << s.status().ToString();
}

TEST(TakeTensorFromOnnxTest, MovesTheDataOutAndEmptiesTheProto) {
  onnx::TensorProto p;
  p.set_name("w");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(2);
  const float values[2] = {1.5f, -2.0f};
  p.set_raw_data(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  auto t = TakeTensorFromOnnx(&p, "");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->shape(), (Shape{2}));
  EXPECT_EQ(t->data<float>()[0], 1.5f);
  EXPECT_EQ(t->data<float>()[1], -2.0f);
  EXPECT_FALSE(p.has_raw_data());
  EXPECT_EQ(p.dims_size(), 0);
}

TEST(TakeTensorFromOnnxTest, RefusesMismatchedDataLikeTensorFromProto) {
  onnx::TensorProto p;
  p.set_name("w");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(3);
  p.set_raw_data(std::string(8, '\0'));
  auto t = TakeTensorFromOnnx(&p, "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("tensor 'w'"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace mf::runtime
