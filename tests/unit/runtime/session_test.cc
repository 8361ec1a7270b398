// Session behaviour the server relies on: input validation, any batch size on symbolic dims,
// concurrent Run() calls, graph rewrites that do not change results, memory accounting.
#include "runtime/session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include "runtime/npy.h"
#include "tests/unit/runtime/model_builder.h"
#include "tests/unit/runtime/session_pairs.h"

namespace mf::runtime {
namespace {

using testing::ExpectSameOutputs;
using testing::LoadPlainAndOptimized;
using testing::ModelBuilder;
using testing::RandomValues;

Tensor FloatTensor(const Shape& shape, const std::vector<float>& values) {
  auto t = Tensor::FromBytes(DataType::kFloat32, shape,
                             {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)});
  EXPECT_TRUE(t.ok());
  return std::move(t).value();
}

// Conv -> BatchNormalization -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Sigmoid: every
// rewrite (BN folding, activation fusion, constant folding) has something to do.
std::string SmallConvNet() {
  ModelBuilder b(13);
  b.Input("x", {-1, 3, 8, 8}).Output("y");
  b.Initializer("w", {4, 3, 3, 3}, RandomValues(108, 1));
  b.Initializer("cb", {4}, RandomValues(4, 2));
  b.Initializer("scale", {4}, {1.5f, 0.5f, 1.f, 2.f});
  b.Initializer("bias", {4}, {0.1f, -0.2f, 0.f, 0.3f});
  b.Initializer("mean", {4}, {0.05f, -0.1f, 0.2f, 0.f});
  b.Initializer("var", {4}, {0.9f, 1.1f, 0.7f, 1.3f});
  b.Initializer("fc", {4, 5}, RandomValues(20, 3));
  b.Initializer("fcb", {5}, RandomValues(5, 4));
  auto* conv = b.Node("Conv", {"x", "w", "cb"}, {"c"}, "conv");
  ModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  b.Node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"bn"}, "bn");
  b.Node("Relu", {"bn"}, {"r"}, "relu");
  b.Node("GlobalAveragePool", {"r"}, {"p"}, "gap");
  b.Node("Flatten", {"p"}, {"f"}, "flatten");
  b.Node("Gemm", {"f", "fc", "fcb"}, {"g"}, "gemm");
  b.Node("Sigmoid", {"g"}, {"y"}, "sigmoid");
  return b.Serialize();
}

TEST(SessionTest, RewritesDoNotChangeResults) {
  auto [slow, fast] = LoadPlainAndOptimized(SmallConvNet());
  ASSERT_TRUE(slow && fast);
  for (int64_t batch : {1, 3, 8}) {
    Tensor x = FloatTensor({batch, 3, 8, 8}, RandomValues(static_cast<size_t>(batch) * 192, 7));
    std::vector<Tensor> a, b;
    ASSERT_TRUE(slow->Run({&x}, &a).ok());
    ASSERT_TRUE(fast->Run({&x}, &b).ok());
    ASSERT_EQ(a[0].shape(), (Shape{batch, 5}));
    ASSERT_EQ(b[0].shape(), a[0].shape());
    for (int64_t i = 0; i < a[0].num_elements(); ++i) {
      EXPECT_NEAR(a[0].data<float>()[i], b[0].data<float>()[i], 1e-5) << "batch " << batch << " element " << i;
    }
  }
}

// A transformer feed-forward block as PyTorch exports it: MatMul + bias Add, exact GELU spelled
// Div / Erf / Add / Mul / Mul, a batched MatMul by a second input, Softmax over the last axis and
// a Slice of it. The rewrites fold the bias and the GELU into the first MatMul.
std::string FeedForwardBlock() {
  ModelBuilder b(17);
  b.Input("x", {-1, 3, 4}).Input("k", {-1, 6, 5}).Output("y");
  b.Initializer("w", {4, 6}, RandomValues(24, 21));
  b.Initializer("bias", {6}, RandomValues(6, 22));
  b.Initializer("sqrt2", {}, {1.41421354f});
  b.Initializer("one", {}, {1.f});
  b.Initializer("half", {}, {0.5f});
  b.Int64Initializer("starts", {1}, {1});
  b.Int64Initializer("ends", {1}, {4});
  b.Int64Initializer("axes", {1}, {2});
  b.Node("MatMul", {"x", "w"}, {"mm"});
  b.Node("Add", {"bias", "mm"}, {"h"});
  b.Node("Div", {"h", "sqrt2"}, {"d"});
  b.Node("Erf", {"d"}, {"e"});
  b.Node("Add", {"e", "one"}, {"e1"});
  b.Node("Mul", {"h", "e1"}, {"he"});
  b.Node("Mul", {"he", "half"}, {"g"});
  b.Node("MatMul", {"g", "k"}, {"s"});
  b.Node("Softmax", {"s"}, {"p"});
  b.Node("Slice", {"p", "starts", "ends", "axes"}, {"y"});
  return b.Serialize();
}

TEST(SessionTest, TransformerFusionsMatchTheFormula) {
  auto [slow, fast] = LoadPlainAndOptimized(FeedForwardBlock());
  ASSERT_TRUE(slow && fast);
  EXPECT_EQ(slow->placement().host, 10);
  EXPECT_EQ(fast->placement().host, 4);  // MatMul (+ bias + GELU), MatMul, Softmax, Slice
  const std::vector<float> w = RandomValues(24, 21), bias = RandomValues(6, 22);
  for (int64_t batch : {1, 5}) {
    std::vector<float> xs = RandomValues(static_cast<size_t>(batch) * 12, 23);
    std::vector<float> ks = RandomValues(static_cast<size_t>(batch) * 30, 24);
    for (float& v : xs) v *= 4.f;  // into erf's tails too
    Tensor x = FloatTensor({batch, 3, 4}, xs), k = FloatTensor({batch, 6, 5}, ks);
    std::vector<Tensor> a, b;
    ASSERT_TRUE(slow->Run({&x, &k}, &a).ok());
    ASSERT_TRUE(fast->Run({&x, &k}, &b).ok());
    ASSERT_EQ(b[0].shape(), (Shape{batch, 3, 3}));
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t r = 0; r < 3; ++r) {
        // The formula in double: g = GELU(x W + bias), s = g K, softmax over s's row.
        double g[6], s[5], sum = 0, mx = -1e300;
        for (int j = 0; j < 6; ++j) {
          double h = bias[static_cast<size_t>(j)];
          for (int i = 0; i < 4; ++i)
            h += xs[static_cast<size_t>((n * 3 + r) * 4 + i)] * w[static_cast<size_t>(i * 6 + j)];
          g[j] = 0.5 * h * (1 + std::erf(h / std::sqrt(2.0)));
        }
        for (int c = 0; c < 5; ++c) {
          s[c] = 0;
          for (int j = 0; j < 6; ++j) s[c] += g[j] * ks[static_cast<size_t>((n * 6 + j) * 5 + c)];
          mx = std::max(mx, s[c]);
        }
        for (double& v : s) sum += std::exp(v - mx);
        for (int c = 1; c < 4; ++c) {
          const double want = std::exp(s[c] - mx) / sum;
          const int64_t at = (n * 3 + r) * 3 + (c - 1);
          EXPECT_NEAR(a[0].data<float>()[at], want, 1e-5) << "unfused, batch " << batch;
          EXPECT_NEAR(b[0].data<float>()[at], want, 1e-5) << "fused, batch " << batch;
        }
      }
    }
  }
}

// Attention as PyTorch exports it, on q, k, v of [L, heads, d]: Transposes into [heads, L, d]
// (k into [heads, d, L]), q divided by a constant, two MatMuls, and a Transpose back. Optimized,
// both MatMuls read and write through the Transposes and scale by the Div. A second product
// through permutations sgemm cannot read (no unit stride) keeps its Transposes.
std::string AttentionBlock() {
  ModelBuilder b(17);
  b.Input("q", {-1, 3, 4}).Input("k", {-1, 3, 4}).Input("v", {-1, 3, 4}).Output("y").Output("y2");
  b.Initializer("scale", {}, {2.f});
  ModelBuilder::IntsAttr(b.Node("Transpose", {"q"}, {"tq"}), "perm", {1, 0, 2});
  b.Node("Div", {"tq", "scale"}, {"sq"});
  ModelBuilder::IntsAttr(b.Node("Transpose", {"k"}, {"tk"}), "perm", {1, 2, 0});
  b.Node("MatMul", {"sq", "tk"}, {"s"});
  b.Node("Softmax", {"s"}, {"p"});
  ModelBuilder::IntsAttr(b.Node("Transpose", {"v"}, {"tv"}), "perm", {1, 0, 2});
  b.Node("MatMul", {"p", "tv"}, {"o"});
  ModelBuilder::IntsAttr(b.Node("Transpose", {"o"}, {"y"}), "perm", {1, 0, 2});
  ModelBuilder::IntsAttr(b.Node("Transpose", {"q"}, {"q201"}), "perm", {2, 0, 1});  // [d, L, heads]
  ModelBuilder::IntsAttr(b.Node("Transpose", {"k"}, {"k210"}), "perm", {2, 1, 0});  // [d, heads, L]
  b.Node("MatMul", {"q201", "k210"}, {"y2"});
  return b.Serialize();
}

TEST(SessionTest, MatMulsReadAndWriteThroughTransposes) {
  auto [slow, fast] = LoadPlainAndOptimized(AttentionBlock());
  ASSERT_TRUE(slow && fast);
  EXPECT_EQ(slow->placement().host, 11);
  EXPECT_EQ(fast->placement().host, 6);  // MatMul, Softmax, MatMul; two Transposes and their MatMul
  for (int64_t len : {1, 5, 17}) {
    const size_t n = static_cast<size_t>(len) * 12;
    Tensor q = FloatTensor({len, 3, 4}, RandomValues(n, 31)), k = FloatTensor({len, 3, 4}, RandomValues(n, 32)),
           v = FloatTensor({len, 3, 4}, RandomValues(n, 33));
    std::vector<Tensor> a = ExpectSameOutputs(*slow, *fast, {&q, &k, &v}, 1e-5, 0, "L " + std::to_string(len));
    ASSERT_EQ(a.size(), 2u);
    ASSERT_EQ(a[0].shape(), (Shape{len, 3, 4}));
    ASSERT_EQ(a[1].shape(), (Shape{4, len, len}));
  }
}

// The GELU formula on a graph input (nothing to fuse it into) becomes a standalone Gelu node.
TEST(SessionTest, StandaloneGeluMatchesTheFormula) {
  ModelBuilder b(17);
  b.Input("x", {-1}).Output("y");
  b.Initializer("inv_sqrt2", {}, {0.70710677f});
  b.Initializer("one", {}, {1.f});
  b.Initializer("half", {}, {0.5f});
  b.Node("Mul", {"inv_sqrt2", "x"}, {"d"});
  b.Node("Erf", {"d"}, {"e"});
  b.Node("Add", {"one", "e"}, {"e1"});
  b.Node("Mul", {"e1", "x"}, {"he"});
  b.Node("Mul", {"half", "he"}, {"y"});
  auto session = Session::LoadFromBytes(b.Serialize(), "", SessionOptions{});
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ((*session)->placement().host, 1);
  std::vector<float> xs;
  for (float v = -8.f; v <= 8.f; v += 0.0625f) xs.push_back(v);
  xs.push_back(NAN);
  Tensor x = FloatTensor({static_cast<int64_t>(xs.size())}, xs);
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({&x}, &out).ok());
  for (size_t i = 0; i + 1 < xs.size(); ++i) {
    const double v = xs[i], want = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    EXPECT_NEAR(out[0].data<float>()[i], want, 1e-6 * std::max(1.0, std::fabs(want))) << "at " << v;
  }
  EXPECT_TRUE(std::isnan(out[0].data<float>()[xs.size() - 1])) << "NaN in, NaN out";
}

// Gemm (transB, bias, Relu) and MatMul (3-D input, fused bias and GELU) by constant weights run
// on packed weights once the product is large enough (oneDNN matmul primitives; PanelGemm on
// AVX2-only CPUs, whose last panel of the 200 columns is partial); the same models with the
// weights as graph inputs run on sgemm. Both must agree at every row count: small (sgemm either
// way), few (PanelGemm splits the panels) and many (it splits the rows).
std::string DenseLayers(bool weights_as_input) {
  ModelBuilder b(17);
  b.Input("x", {-1, -1, 128});
  if (weights_as_input) b.Input("w1", {256, 128}).Input("w2", {256, 200});
  b.Output("y");
  if (!weights_as_input) {
    b.Initializer("w1", {256, 128}, RandomValues(256 * 128, 31));
    b.Initializer("w2", {256, 200}, RandomValues(256 * 200, 32));
  }
  b.Initializer("b1", {256}, RandomValues(256, 33));
  b.Initializer("b2", {200}, RandomValues(200, 34));
  b.Initializer("sqrt2", {}, {1.41421354f});
  b.Initializer("one", {}, {1.f});
  b.Initializer("half", {}, {0.5f});
  b.Int64Initializer("rows", {2}, {-1, 128});
  b.Node("Reshape", {"x", "rows"}, {"x2"});
  ModelBuilder::IntAttr(b.Node("Gemm", {"x2", "w1", "b1"}, {"g"}), "transB", 1);
  b.Node("Relu", {"g"}, {"r"});
  b.Node("MatMul", {"r", "w2"}, {"mm"});
  b.Node("Add", {"mm", "b2"}, {"h"});
  b.Node("Div", {"h", "sqrt2"}, {"d"});
  b.Node("Erf", {"d"}, {"e"});
  b.Node("Add", {"e", "one"}, {"e1"});
  b.Node("Mul", {"h", "e1"}, {"he"});
  b.Node("Mul", {"he", "half"}, {"y"});
  return b.Serialize();
}

TEST(SessionTest, PackedDenseWeightsMatchRuntimeWeights) {
  auto packed = Session::LoadFromBytes(DenseLayers(false), "", SessionOptions{});
  auto runtime = Session::LoadFromBytes(DenseLayers(true), "", SessionOptions{});
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  Tensor w1 = FloatTensor({256, 128}, RandomValues(256 * 128, 31)),
         w2 = FloatTensor({256, 200}, RandomValues(256 * 200, 32));
  for (auto [batch, tokens] : {std::pair<int64_t, int64_t>{1, 1}, {2, 3}, {1, 40}, {4, 32}, {16, 8}, {5, 31}}) {
    Tensor x = FloatTensor({batch, tokens, 128}, RandomValues(static_cast<size_t>(batch * tokens * 128), 35));
    std::vector<Tensor> a, b;
    ASSERT_TRUE((*packed)->Run({&x}, &a).ok());
    ASSERT_TRUE((*runtime)->Run({&x, &w1, &w2}, &b).ok());
    ASSERT_EQ(a[0].shape(), (Shape{batch * tokens, 200}));
    ASSERT_EQ(b[0].shape(), a[0].shape());
    for (int64_t i = 0; i < a[0].num_elements(); ++i) {
      ASSERT_NEAR(a[0].data<float>()[i], b[0].data<float>()[i], 1e-4 * std::max(1.f, std::fabs(b[0].data<float>()[i])))
          << batch << "x" << tokens << " rows, element " << i;
    }
  }
  EXPECT_GT((*packed)->memory_bytes(), (*runtime)->memory_bytes()) << "the packed copies are counted";
}

// The conv kernel keeps constant weights packed per oneDNN layout, and the graph's plain copy is
// dropped after the warm-up: shapes whose primitive wants another layout get it from a packed
// copy. Checked against the same conv with the weights as a graph input (never packed), over
// batch sizes and spatial sizes that make oneDNN pick different implementations.
std::string ConvOnly(bool weights_as_input) {
  ModelBuilder b(13);
  b.Input("x", {-1, 16, -1, -1});
  if (weights_as_input) b.Input("w", {32, 16, 3, 3});
  b.Output("y");
  if (!weights_as_input) b.Initializer("w", {32, 16, 3, 3}, RandomValues(32 * 16 * 9, 11));
  b.Initializer("b", {32}, RandomValues(32, 12));
  auto* conv = b.Node("Conv", {"x", "w", "b"}, {"y"}, "conv");
  ModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  return b.Serialize();
}

TEST(SessionTest, PackedConstantWeightsMatchRuntimeWeightsAtEveryShape) {
  auto packed = Session::LoadFromBytes(ConvOnly(false), "", SessionOptions{});
  auto runtime = Session::LoadFromBytes(ConvOnly(true), "", SessionOptions{});
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  Tensor w = FloatTensor({32, 16, 3, 3}, RandomValues(32 * 16 * 9, 11));
  const std::vector<Shape> shapes = {{1, 16, 1, 1}, {3, 16, 5, 7}, {8, 16, 16, 16}, {1, 16, 32, 32}, {2, 16, 3, 3}};
  for (const Shape& shape : shapes) {
    const int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    Tensor x = FloatTensor(shape, RandomValues(static_cast<size_t>(n), 13));
    std::vector<Tensor> a, b;
    ASSERT_TRUE((*packed)->Run({&x}, &a).ok());
    ASSERT_TRUE((*runtime)->Run({&x, &w}, &b).ok());
    ASSERT_EQ(a[0].shape(), b[0].shape());
    for (int64_t i = 0; i < a[0].num_elements(); ++i) {
      ASSERT_NEAR(a[0].data<float>()[i], b[0].data<float>()[i], 1e-4) << ShapeToString(shape) << " element " << i;
    }
  }
}

// Residual blocks: conv1+relu -> a; a -> conv2 [-> conv2b]; Add(last conv, a) -> relu -> conv3
// -> global pool. Optimized, the last conv absorbs the Add (sum post-op) and the activations
// between the convs stay channels-last; the results must not change in any of these:
enum class Residual {
  kAlsoConvInput,  // the Add reads conv2's own input: conv2 cannot overwrite it
  kLastRead,       // conv2b is the residual's last reader: it accumulates into its buffer in place
  kReadLater,      // a later node (a second output) still reads the residual: it must stay intact
};

std::string ResidualNet(Residual kind) {
  ModelBuilder b(13);
  b.Input("x", {-1, 4, 6, 6}).Output("y");
  if (kind == Residual::kReadLater) b.Output("y2");
  b.Initializer("w1", {8, 4, 3, 3}, RandomValues(288, 11));
  b.Initializer("w2", {8, 8, 3, 3}, RandomValues(576, 12));
  b.Initializer("b2", {8}, RandomValues(8, 13));
  b.Initializer("w2b", {8, 8, 1, 1}, RandomValues(64, 15));
  b.Initializer("w3", {6, 8, 1, 1}, RandomValues(48, 14));
  auto* c1 = b.Node("Conv", {"x", "w1"}, {"c1"}, "conv1");
  ModelBuilder::IntsAttr(c1, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c1"}, {"a"}, "relu1");
  auto* c2 = b.Node("Conv", {"a", "w2", "b2"}, {"c2"}, "conv2");
  ModelBuilder::IntsAttr(c2, "pads", {1, 1, 1, 1});
  std::string last = "c2";
  if (kind != Residual::kAlsoConvInput) {
    b.Node("Conv", {"c2", "w2b"}, {"c2b"}, "conv2b");
    last = "c2b";
  }
  b.Node("Add", {last, "a"}, {"s"}, "residual");
  b.Node("Relu", {"s"}, {"r"}, "relu2");
  b.Node("Conv", {"r", "w3"}, {"c3"}, "conv3");
  b.Node("GlobalAveragePool", {"c3"}, {"y"}, "pool");
  if (kind == Residual::kReadLater) b.Node("GlobalAveragePool", {"a"}, {"y2"}, "pool_residual");
  return b.Serialize();
}

TEST(SessionTest, ResidualFusionAndChannelsLastDoNotChangeResults) {
  for (Residual kind : {Residual::kAlsoConvInput, Residual::kLastRead, Residual::kReadLater}) {
    auto [slow, fast] = LoadPlainAndOptimized(ResidualNet(kind));
    ASSERT_TRUE(slow && fast);
    for (int64_t batch : {1, 5}) {
      Tensor x = FloatTensor({batch, 4, 6, 6}, RandomValues(static_cast<size_t>(batch) * 144, 21));
      std::vector<Tensor> a =
          ExpectSameOutputs(*slow, *fast, {&x}, 1e-4, 0,
                            "case " + std::to_string(static_cast<int>(kind)) + " batch " + std::to_string(batch));
      ASSERT_FALSE(a.empty());
      ASSERT_EQ(a[0].shape(), (Shape{batch, 6, 1, 1}));
    }
  }
}

// A bottleneck with weights beyond 2 MiB: its 1x1 convolutions between channels-last
// activations run as matmuls (bias, residual and ReLU as post-ops); results must not change.
// Adds conv weights `name` [m, c, k, k], scaled by 1/sqrt(fan-in) so that activations stay near
// 1 through deep test nets and comparisons are not of large sums cancelling.
void AddConvWeights(ModelBuilder& b, const std::string& name, int64_t m, int64_t c, int64_t k, uint32_t seed) {
  std::vector<float> v = RandomValues(static_cast<size_t>(m * c * k * k), seed);
  for (float& x : v) x /= std::sqrt(static_cast<float>(c * k * k));
  b.Initializer(name, {m, c, k, k}, v);
}

// The stem both nets below start with, channels-last from its first convolution on: x (8
// channels) -> 3x3 conv to 512 -> ReLU -> 1x1 to 1024 with bias (2 MiB of weights) -> ReLU ->
// 1x1 back to 512 plus the first ReLU's output (a residual, summed in place) -> ReLU. Seeds
// `seed` to `seed + 3`; returns the name of its output.
std::string AddWideResidualStem(ModelBuilder& b, uint32_t seed) {
  AddConvWeights(b, "stem_w0", 512, 8, 3, seed);
  AddConvWeights(b, "stem_w1", 1024, 512, 1, seed + 1);
  b.Initializer("stem_b1", {1024}, RandomValues(1024, seed + 2));
  AddConvWeights(b, "stem_w2", 512, 1024, 1, seed + 3);
  ModelBuilder::IntsAttr(b.Node("Conv", {"x", "stem_w0"}, {"stem_c0"}), "pads", {1, 1, 1, 1});
  b.Node("Relu", {"stem_c0"}, {"stem_a0"});
  b.Node("Conv", {"stem_a0", "stem_w1", "stem_b1"}, {"stem_c1"});
  b.Node("Relu", {"stem_c1"}, {"stem_a1"});
  b.Node("Conv", {"stem_a1", "stem_w2"}, {"stem_c2"});
  b.Node("Add", {"stem_c2", "stem_a0"}, {"stem_s"});
  b.Node("Relu", {"stem_s"}, {"stem"});
  return "stem";
}

// 1x1 convolutions with weights of 2 MiB, at more rows than PanelGemm takes (12x12 pixels):
// oneDNN's matmul over the channels-last bytes, the strided one over gathered pixels.
std::string WidePointwiseNet() {
  ModelBuilder b(13);
  b.Input("x", {-1, 8, 12, 12}).Output("y");
  const std::string stem = AddWideResidualStem(b, 41);
  AddConvWeights(b, "w4", 1024, 512, 1, 46);
  ModelBuilder::IntsAttr(b.Node("Conv", {stem, "w4"}, {"c4"}), "strides", {2, 2});  // 12x12 -> 6x6
  b.Node("Relu", {"c4"}, {"r4"});
  ModelBuilder::IntsAttr(b.Node("MaxPool", {"r4"}, {"y"}), "kernel_shape", {1, 1});  // every value
  return b.Serialize();
}

TEST(SessionTest, WidePointwiseConvolutionsAsMatMulsDoNotChangeResults) {
  auto [slow, fast] = LoadPlainAndOptimized(WidePointwiseNet());
  ASSERT_TRUE(slow && fast);
  for (int64_t batch : {1, 3}) {
    Tensor x = FloatTensor({batch, 8, 12, 12}, RandomValues(static_cast<size_t>(batch) * 8 * 144, 45));
    std::vector<Tensor> a = ExpectSameOutputs(*slow, *fast, {&x}, 1e-3, 1e-3, "batch " + std::to_string(batch));
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a[0].shape(), (Shape{batch, 1024, 6, 6}));
  }
}

// Runs at the same shapes take their activations from one slab planned by an earlier run
// (runtime/memory_pattern.h): the load's run records batch 1, the first run at each shape differs
// from it (kernels' one-time work) and plans again, the next ones replay. Interleaved shapes
// share the slab; concurrent runs take it in turn. Every run must give the same bits.
TEST(SessionTest, RunsThatReplayTheirMemoryPatternGiveTheSameBits) {
  auto session = Session::LoadFromBytes(WidePointwiseNet(), "", SessionOptions{});
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::map<int64_t, Tensor> inputs, expected;
  for (int64_t batch : {1, 3}) {
    inputs[batch] = FloatTensor({batch, 8, 12, 12}, RandomValues(static_cast<size_t>(batch) * 8 * 144, 45));
  }
  const auto run = [&](int64_t batch) {
    std::vector<Tensor> out;
    Status s = (*session)->Run({&inputs[batch]}, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return s.ok() ? std::move(out[0]) : Tensor();
  };
  const auto same = [](const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
  };
  for (int64_t batch : {1, 3, 1, 3, 3, 3, 1, 1, 3, 1}) {
    Tensor y = run(batch);
    if (!expected.count(batch)) {
      expected[batch] = std::move(y);
      continue;
    }
    EXPECT_TRUE(same(y, expected[batch])) << "batch " << batch;
  }
  std::atomic<int> differing{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        const int64_t batch = (t + i) % 2 ? 3 : 1;
        if (!same(run(batch), expected[batch])) ++differing;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(differing.load(), 0);
}

// torch.onnx's dynamic reshape: Shape -> Gather -> Unsqueeze -> Concat computes [N, -1] from
// the input on every run. The plan keeps those values per input shapes (graph/shape_values.h) and
// skips their nodes at shapes it has seen: at interleaved shapes each run must still reshape to
// its own batch, and a length computed from data must be computed every time.
TEST(SessionTest, ShapeComputationsKeptPerInputShapesFollowEachRun) {
  ModelBuilder b(13);
  b.Input("x", {-1, 2, 3}).Output("y").Output("count", {}, onnx::TensorProto::INT64);
  b.Int64Initializer("zero", {1}, {0});
  b.Int64Initializer("axes", {1}, {0});
  b.Int64Initializer("minus_one", {1}, {-1});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Gather", {"s", "zero"}, {"n"});
  b.Node("Concat", {"n", "minus_one"}, {"target"});
  ModelBuilder::IntAttr(b.graph()->mutable_node(b.graph()->node_size() - 1), "axis", 0);
  b.Node("Reshape", {"x", "target"}, {"y"});
  // count = len(Range(0, sum(x), 1)): a length computed from data.
  b.Initializer("start", {}, {0.f});
  b.Initializer("delta", {}, {1.f});
  ModelBuilder::IntAttr(b.Node("ReduceSum", {"x"}, {"sum"}), "keepdims", 0);
  b.Node("Range", {"start", "sum", "delta"}, {"range"});
  b.Node("Shape", {"range"}, {"range_shape"});
  b.Node("Gather", {"range_shape", "axes"}, {"count"});
  for (SessionOptions options : {SessionOptions{}, [] {
                                   SessionOptions plain;
                                   plain.optimize = false;
                                   return plain;
                                 }()}) {
    auto session = Session::LoadFromBytes(b.Serialize(), "", options);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    int round = 0;
    for (int64_t batch : {1, 4, 1, 4, 4, 2, 1, 2}) {
      // Zeros in a different place each run: the sum changes at the same shapes.
      std::vector<float> values(static_cast<size_t>(batch) * 6, 1.f);
      for (size_t i = 0; i < values.size(); i += static_cast<size_t>(2 + round % 3)) values[i] = 0.f;
      ++round;
      Tensor x = FloatTensor({batch, 2, 3}, values);
      std::vector<Tensor> out;
      Status s = (*session)->Run({&x}, &out);
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(out[0].shape(), (Shape{batch, 6})) << "round " << round;
      EXPECT_EQ(std::memcmp(out[0].raw_data(), values.data(), values.size() * sizeof(float)), 0);
      int64_t nonzero = 0;
      for (float v : values) nonzero += v != 0.f;
      ASSERT_EQ(out[1].num_elements(), 1);
      EXPECT_EQ(out[1].data<int64_t>()[0], nonzero) << "round " << round;
    }
  }
}

// Convolutions with over 1 MiB of weights: at a few rows (batch 1 here) they run on PanelGemm,
// at more on oneDNN (convolution or, for the stem's 1x1s, matmul), from the same constant weights,
// whichever comes first. Covered: 1x1 with bias, with a residual and strided; 3x3 padded and
// strided, and dilated; odd channel counts for a masked last panel (1000, 300) and a short last
// chunk of K (300).
std::string PanelConvNet() {
  ModelBuilder b(13);
  b.Input("x", {-1, 8, 8, 8}).Output("y");
  const std::string stem = AddWideResidualStem(b, 50);
  AddConvWeights(b, "w3", 256, 512, 3, 54);
  AddConvWeights(b, "w4", 300, 256, 3, 55);
  b.Initializer("b4", {300}, RandomValues(300, 56));
  AddConvWeights(b, "w5", 1000, 300, 1, 57);
  onnx::NodeProto* c3 = b.Node("Conv", {stem, "w3"}, {"c3"});  // 8x8 -> 4x4
  ModelBuilder::IntsAttr(c3, "pads", {1, 1, 1, 1});
  ModelBuilder::IntsAttr(c3, "strides", {2, 2});
  b.Node("Relu", {"c3"}, {"a3"});
  onnx::NodeProto* c4 = b.Node("Conv", {"a3", "w4", "b4"}, {"c4"});  // 4x4 -> 4x4
  ModelBuilder::IntsAttr(c4, "pads", {2, 2, 2, 2});
  ModelBuilder::IntsAttr(c4, "dilations", {2, 2});
  b.Node("Relu", {"c4"}, {"a4"});
  ModelBuilder::IntsAttr(b.Node("Conv", {"a4", "w5"}, {"c5"}), "strides", {2, 2});  // 4x4 -> 2x2
  ModelBuilder::FloatAttr(b.Node("LeakyRelu", {"c5"}, {"a5"}), "alpha", 0.2f);
  ModelBuilder::IntsAttr(b.Node("MaxPool", {"a5"}, {"y"}), "kernel_shape", {1, 1});  // every value
  // No declared shape: the load's batch-1 warm-up is skipped, so the first run's batch size
  // decides which packing comes first.
  b.graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  return b.Serialize();
}

TEST(SessionTest, FewRowConvolutionsOnPanelsDoNotChangeResults) {
  // Batch 1 (64 rows) runs on panels, batch 2 (128 rows) on oneDNN: both orders, so that each
  // packing is also made after the plain weights were dropped. The stem's 1x1 convolutions
  // go to oneDNN's matmul at batch 2, whose packed layout is the panels' bytes: one copy serves
  // both, so memory does not grow from one batch size to the other.
  for (std::vector<int64_t> order : {std::vector<int64_t>{1, 2, 1}, std::vector<int64_t>{2, 1, 2}}) {
    auto [slow, fast] = LoadPlainAndOptimized(PanelConvNet());
    ASSERT_TRUE(slow && fast);
    size_t memory = 0;
    for (int64_t batch : order) {
      Tensor x = FloatTensor({batch, 8, 8, 8}, RandomValues(static_cast<size_t>(batch) * 512, 56));
      std::vector<Tensor> a = ExpectSameOutputs(
          *slow, *fast, {&x}, 1e-3, 1e-3, "batch " + std::to_string(batch) + " after " + std::to_string(order[0]));
      ASSERT_FALSE(a.empty());
      ASSERT_EQ(a[0].shape(), (Shape{batch, 1000, 2, 2}));
      if (memory == 0) memory = fast->memory_bytes();
      EXPECT_EQ(fast->memory_bytes(), memory) << "batch " << batch;
    }
  }
}

// 3x3 convolutions of stride 1 run as WinogradConv on AVX2-only CPUs (elsewhere on oneDNN or
// panels: the results must not change either way). A residual block of them at 20x20 (100 tiles:
// the threads split the tiles), 8x8 (16 tiles: they split each product's panels), then 20x19 at
// batch 2, after the load dropped the plain weights.
std::string WinogradNet() {
  ModelBuilder b(13);
  b.Input("x", {-1, 16, -1, -1}).Output("y");
  AddConvWeights(b, "w1", 16, 16, 3, 61);
  b.Initializer("b1", {16}, RandomValues(16, 62));
  AddConvWeights(b, "w2", 16, 16, 3, 63);
  AddConvWeights(b, "w3", 24, 16, 1, 64);
  ModelBuilder::IntsAttr(b.Node("Conv", {"x", "w1", "b1"}, {"c1"}), "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c1"}, {"a1"});
  ModelBuilder::IntsAttr(b.Node("Conv", {"a1", "w2"}, {"c2"}), "pads", {1, 1, 1, 1});
  b.Node("Add", {"c2", "a1"}, {"s"});
  b.Node("Relu", {"s"}, {"a2"});
  b.Node("Conv", {"a2", "w3"}, {"y"});
  return b.Serialize();
}

TEST(SessionTest, WinogradConvolutionsDoNotChangeResults) {
  auto [slow, fast] = LoadPlainAndOptimized(WinogradNet());
  ASSERT_TRUE(slow && fast);
  for (const Shape& shape : {Shape{1, 16, 20, 20}, Shape{1, 16, 8, 8}, Shape{2, 16, 20, 19}}) {
    const int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    Tensor x = FloatTensor(shape, RandomValues(static_cast<size_t>(n), 65));
    std::vector<Tensor> a = ExpectSameOutputs(*slow, *fast, {&x}, 1e-4, 1e-4, ShapeToString(shape));
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a[0].shape(), (Shape{shape[0], 24, shape[2], shape[3]}));
  }
}

TEST(SessionTest, ConcurrentFirstRunsPackPanelsAndOneDnnCopiesOnce) {
  // Four threads make the first runs at once, at batch 1 (panels) and 2 (oneDNN), on a session
  // with no warm-up: both packings race, and every result must still match a serial run's.
  auto reference = Session::LoadFromBytes(PanelConvNet(), "", SessionOptions{});
  auto shared = Session::LoadFromBytes(PanelConvNet(), "", SessionOptions{});
  ASSERT_TRUE(reference.ok() && shared.ok());
  std::vector<Tensor> inputs;
  std::vector<std::vector<Tensor>> expected(2);
  for (int64_t batch : {1, 2}) {
    inputs.push_back(FloatTensor({batch, 8, 8, 8}, RandomValues(static_cast<size_t>(batch) * 512, 60 + batch)));
    ASSERT_TRUE((*reference)->Run({&inputs.back()}, &expected[static_cast<size_t>(batch - 1)]).ok());
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const size_t which = static_cast<size_t>(t % 2);
      for (int iter = 0; iter < 3; ++iter) {
        std::vector<Tensor> out;
        if (!(*shared)->Run({&inputs[which]}, &out).ok() || out.size() != 1) {
          ++mismatches;
          continue;
        }
        const Tensor& want = expected[which][0];
        for (int64_t i = 0; i < want.num_elements(); ++i) {
          if (out[0].data<float>()[i] != want.data<float>()[i]) {
            ++mismatches;
            break;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(SessionTest, ConcurrentRunsMatchSerialRuns) {
  auto s = Session::LoadFromBytes(SmallConvNet(), "", SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  constexpr int kThreads = 6;
  std::vector<Tensor> inputs;
  std::vector<std::vector<Tensor>> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    int64_t batch = 1 + t % 3;
    inputs.push_back(FloatTensor({batch, 3, 8, 8}, RandomValues(static_cast<size_t>(batch) * 192, 100 + t)));
  }
  for (int t = 0; t < kThreads; ++t)
    ASSERT_TRUE((*s)->Run({&inputs[static_cast<size_t>(t)]}, &expected[static_cast<size_t>(t)]).ok());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int iter = 0; iter < 20; ++iter) {
        std::vector<Tensor> out;
        if (!(*s)->Run({&inputs[static_cast<size_t>(t)]}, &out).ok()) {
          ++mismatches;
          continue;
        }
        const Tensor& want = expected[static_cast<size_t>(t)][0];
        for (int64_t i = 0; i < want.num_elements(); ++i) {
          if (out[0].data<float>()[i] != want.data<float>()[i]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(SessionTest, RefusesBadInputsAndStaysUsable) {
  auto s = Session::LoadFromBytes(SmallConvNet(), "", SessionOptions{});
  ASSERT_TRUE(s.ok());
  std::vector<Tensor> out;
  Tensor wrong_dims = FloatTensor({1, 4, 8, 8}, RandomValues(256, 1));
  Status st = (*s)->Run({&wrong_dims}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'x'"), std::string::npos) << st.message();
  auto ints = Tensor::Allocate(DataType::kInt64, {1, 3, 8, 8});
  EXPECT_EQ((*s)->Run({&*ints}, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->Run({}, &out).code(), StatusCode::kInvalidArgument);
  Tensor good = FloatTensor({2, 3, 8, 8}, RandomValues(384, 1));
  EXPECT_TRUE((*s)->Run({&good}, &out).ok());
}

TEST(SessionTest, MemoryBytesCountsWeightsAndArena) {
  auto s = Session::LoadFromBytes(SmallConvNet(), "", SessionOptions{});
  ASSERT_TRUE(s.ok());
  // Folded conv weights + bias and the FC weights, plus at least one activation.
  size_t weights = (108 + 4 + 20 + 5) * sizeof(float);
  EXPECT_GT((*s)->memory_bytes(), weights);
  EXPECT_LT((*s)->memory_bytes(), 64u << 10);
}

TEST(SessionTest, CudaBackendIsReportedUnavailable) {
  SessionOptions o;
  o.backend = Backend::kCuda;
  auto s = Session::LoadFromBytes(SmallConvNet(), "", o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
}

TEST(SessionTest, KernelErrorsNameTheNode) {
  ModelBuilder b;
  b.Input("x", {-1, 6}).Output("y").Int64Initializer("shape", {2}, {4, -1});
  b.Node("Reshape", {"x", "shape"}, {"y"}, "to_four_rows");
  auto s = Session::LoadFromBytes(b.Serialize(), "", SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Tensor x = FloatTensor({1, 6}, RandomValues(6, 1));  // 6 elements cannot make 4 rows
  std::vector<Tensor> out;
  Status st = (*s)->Run({&x}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("node 'to_four_rows' (Reshape)"), std::string::npos) << st.message();
}

TEST(NpyTest, RoundTripsAndRefusesGarbage) {
  Tensor t = FloatTensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto back = ParseNpy(SerializeNpy(t));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shape(), t.shape());
  EXPECT_EQ(back->bytes(), t.bytes());
  EXPECT_FALSE(ParseNpy("garbage").ok());
  std::string bytes = SerializeNpy(t);
  EXPECT_FALSE(ParseNpy(bytes.substr(0, bytes.size() - 1)).ok());
  std::string fortran = bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_FALSE(ParseNpy(fortran).ok());
}

}  // namespace
}  // namespace mf::runtime
