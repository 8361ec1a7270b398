// Pools inside convolution chains run channels-last on the CPU (oneDNN pooling in NHWC, or our
// NCHW loops between reorders where oneDNN would differ from ONNX). Each case
// runs a Conv -> pool -> Conv model optimized (channels-last) and unoptimized (plain NCHW
// kernels only) and the answers must agree; the pass test checks the pool really is in the
// chain, so the comparisons cannot pass by running NCHW on both sides.
#include <gtest/gtest.h>

#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "runtime/graph/model_loader.h"
#include "runtime/passes/passes.h"
#include "runtime/session.h"
#include "tests/unit/runtime/model_builder.h"
#include "tests/unit/runtime/session_pairs.h"

namespace mf::runtime {
namespace {

using testing::ModelBuilder;
using testing::RandomValues;

struct PoolCase {
  std::string name;
  std::string op;  // MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t ceil_mode = 0, count_include_pad = 0;
  std::string auto_pad;
};

void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

void AddPool(ModelBuilder& b, const PoolCase& c, const std::string& in, const std::string& out) {
  auto* n = b.Node(c.op, {in}, {out}, "pool");
  if (!c.kernel.empty()) ModelBuilder::IntsAttr(n, "kernel_shape", c.kernel);
  if (!c.strides.empty()) ModelBuilder::IntsAttr(n, "strides", c.strides);
  if (!c.pads.empty()) ModelBuilder::IntsAttr(n, "pads", c.pads);
  if (!c.dilations.empty()) ModelBuilder::IntsAttr(n, "dilations", c.dilations);
  if (c.ceil_mode) ModelBuilder::IntAttr(n, "ceil_mode", 1);
  if (c.count_include_pad) ModelBuilder::IntAttr(n, "count_include_pad", 1);
  if (!c.auto_pad.empty()) {
    auto* a = n->add_attribute();
    a->set_name("auto_pad");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(c.auto_pad);
  }
}

bool IsGlobal(const PoolCase& c) { return c.op.rfind("Global", 0) == 0; }

// x [N, 3, H, W] -> Conv 3x3 + Relu -> pool -> (Conv 3x3 unless the pool is global) -> y.
// Relu keeps many equal zeros in the pooled windows, which max pooling must treat like ONNX.
std::string ConvPoolConv(const PoolCase& c, int64_t channels) {
  ModelBuilder b(13);
  b.Input("x", {-1, 3, -1, -1}).Output("y");
  b.Initializer("w1", {channels, 3, 3, 3}, RandomValues(static_cast<size_t>(channels) * 27, 31));
  b.Initializer("b1", {channels}, RandomValues(static_cast<size_t>(channels), 32));
  b.Initializer("w2", {5, channels, 3, 3}, RandomValues(static_cast<size_t>(channels) * 45, 33));
  auto* c1 = b.Node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  ModelBuilder::IntsAttr(c1, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c1"}, {"a"}, "relu");
  if (IsGlobal(c)) {
    AddPool(b, c, "a", "y");
  } else {
    AddPool(b, c, "a", "p");
    auto* c2 = b.Node("Conv", {"p", "w2"}, {"y"}, "conv2");
    ModelBuilder::IntsAttr(c2, "pads", {1, 1, 1, 1});
  }
  return b.Serialize();
}

Tensor RandomImage(int64_t n, int64_t h, int64_t w, uint32_t seed) {
  std::vector<float> v = RandomValues(static_cast<size_t>(n * 3 * h * w), seed);
  auto t = Tensor::FromBytes(DataType::kFloat32, {n, 3, h, w},
                             {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)});
  EXPECT_TRUE(t.ok());
  return std::move(t).value();
}

// Channel counts: a multiple of oneDNN's SIMD block and not (vector tails).
class ChannelsLastPoolTest : public ::testing::TestWithParam<std::tuple<PoolCase, int64_t>> {};

TEST_P(ChannelsLastPoolTest, MatchesPlainKernels) {
  const auto& [c, channels] = GetParam();
  std::string model = ConvPoolConv(c, channels);
  auto [slow, fast] = testing::LoadPlainAndOptimized(model);
  ASSERT_TRUE(slow && fast);
  // Odd and even sizes: floor/ceil rounding and windows running off the end differ between them.
  for (auto [n, h, w] : {std::tuple<int64_t, int64_t, int64_t>{1, 9, 9}, {3, 12, 10}, {2, 7, 16}}) {
    Tensor x = RandomImage(n, h, w, static_cast<uint32_t>(n * 100 + h));
    testing::ExpectSameOutputs(*slow, *fast, {&x}, 1e-4, 0,
                               "input " + std::to_string(n) + "x3x" + std::to_string(h) + "x" + std::to_string(w));
  }
}

const PoolCase kCases[] = {
    {"resnet_stem_max", "MaxPool", {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, 0, ""},
    {"max_ceil", "MaxPool", {3, 3}, {2, 2}, {}, {}, 1, 0, ""},
    {"max_floor_drops_tail", "MaxPool", {2, 2}, {3, 3}, {}, {}, 0, 0, ""},
    {"max_dilated", "MaxPool", {2, 2}, {1, 1}, {1, 0, 0, 1}, {2, 2}, 0, 0, ""},
    {"max_same_upper", "MaxPool", {3, 3}, {2, 2}, {}, {}, 0, 0, "SAME_UPPER"},
    {"max_asymmetric", "MaxPool", {3, 2}, {1, 2}, {0, 1, 2, 0}, {}, 0, 0, ""},
    {"avg_exclude_pad", "AveragePool", {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, 0, ""},
    {"avg_include_pad", "AveragePool", {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, 1, ""},
    {"avg_exclude_pad_ceil", "AveragePool", {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, 0, ""},
    // Ceil-mode windows past the end padding: the divisor is not the kernel size (our loops).
    {"avg_include_pad_ceil_overhang", "AveragePool", {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, 1, ""},
    {"avg_dilated", "AveragePool", {2, 2}, {2, 2}, {}, {2, 2}, 0, 0, ""},
    {"avg_same_lower", "AveragePool", {2, 2}, {2, 2}, {}, {}, 0, 1, "SAME_LOWER"},
    {"global_max", "GlobalMaxPool", {}, {}, {}, {}, 0, 0, ""},
    {"global_avg", "GlobalAveragePool", {}, {}, {}, {}, 0, 0, ""},
};

INSTANTIATE_TEST_SUITE_P(Pools, ChannelsLastPoolTest,
                         ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Values(16, 20, 24, 32)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_c" + std::to_string(std::get<1>(info.param));
                         });

// The comparisons above mean something only if the optimized graph has the pool in the
// channels-last chain: its input, and (for a 2-D pool feeding a Conv) its output.
TEST(ChannelsLastPassTest, PoolsJoinConvolutionChains) {
  for (const PoolCase& c : kCases) {
    auto graph = LoadModelBytes(ConvPoolConv(c, 16), "");
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    FuseActivations(&*graph);
    AssignChannelsLast(&*graph);
    for (const Node& n : graph->nodes) {
      if (n.op_type != c.op) continue;
      EXPECT_TRUE(graph->values[static_cast<size_t>(n.inputs[0])].nhwc) << c.name;
      EXPECT_EQ(graph->values[static_cast<size_t>(n.outputs[0])].nhwc, !IsGlobal(c)) << c.name;
    }
  }
}

// A pool reading a graph input and one writing a graph output keep those sides NCHW.
TEST(ChannelsLastPassTest, GraphInputsAndOutputsStayPlain) {
  ModelBuilder b(13);
  b.Input("x", {1, 16, 8, 8}).Output("y");
  b.Initializer("w", {16, 16, 1, 1}, RandomValues(256, 41));
  AddPool(b, {"in", "MaxPool", {2, 2}, {2, 2}, {}, {}, 0, 0, ""}, "x", "p");
  b.Node("Conv", {"p", "w"}, {"c"}, "conv");
  auto* out_pool = b.Node("AveragePool", {"c"}, {"y"}, "pool_out");
  ModelBuilder::IntsAttr(out_pool, "kernel_shape", {2, 2});
  auto graph = LoadModelBytes(b.Serialize(), "");
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  AssignChannelsLast(&*graph);
  const Node& first = graph->nodes[0];
  const Node& last = graph->nodes[2];
  EXPECT_FALSE(graph->values[static_cast<size_t>(first.inputs[0])].nhwc);
  EXPECT_TRUE(graph->values[static_cast<size_t>(first.outputs[0])].nhwc);
  EXPECT_TRUE(graph->values[static_cast<size_t>(last.inputs[0])].nhwc);
  EXPECT_FALSE(graph->values[static_cast<size_t>(last.outputs[0])].nhwc);

  // And the mixed-layout pools compute what the plain kernels do.
  SessionOptions plain;
  plain.optimize = false;
  auto slow = Session::LoadFromBytes(b.Serialize(), "", plain);
  auto fast = Session::LoadFromBytes(b.Serialize(), "", SessionOptions{});
  ASSERT_TRUE(slow.ok() && fast.ok());
  std::vector<float> v = RandomValues(16 * 64, 42);
  auto x = Tensor::FromBytes(DataType::kFloat32, {1, 16, 8, 8},
                             {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)});
  ASSERT_TRUE(x.ok());
  std::vector<Tensor> r1, r2;
  ASSERT_TRUE((*slow)->Run({&*x}, &r1).ok());
  ASSERT_TRUE((*fast)->Run({&*x}, &r2).ok());
  ASSERT_EQ(r1[0].shape(), r2[0].shape());
  for (int64_t i = 0; i < r1[0].num_elements(); ++i)
    ASSERT_NEAR(r1[0].data<float>()[i], r2[0].data<float>()[i], 1e-4) << i;
}

}  // namespace
}  // namespace mf::runtime
