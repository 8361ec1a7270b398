// Conv, ConvTranspose and the pooling ops on the CUDA backend against the CPU backend: attribute
// variants (groups, depthwise, dilations, strides, asymmetric and automatic pads), fused
// activations and residuals, 1-D/3-D, symbolic and empty batches, in FP32, TF32 and FP16.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "runtime/cuda/cuda_common.h"
#include "tests/unit/runtime/model_builder.h"

namespace mf::runtime::testing {
namespace {

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

void StringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

using IntAttrs = std::vector<std::pair<std::string, std::vector<int64_t>>>;

void SetAttrs(onnx::NodeProto* n, const IntAttrs& ints, const std::string& auto_pad) {
  for (const auto& [name, v] : ints) {
    if (name == "group" || name == "ceil_mode" || name == "count_include_pad") {
      ModelBuilder::IntAttr(n, name, v.at(0));
    } else {
      ModelBuilder::IntsAttr(n, name, v);
    }
  }
  if (!auto_pad.empty()) StringAttr(n, "auto_pad", auto_pad);
}

struct ConvCase {
  std::string op = "Conv";
  Shape x;  // run-time input shape
  Shape w;
  bool bias = true;
  IntAttrs ints;
  std::string auto_pad;
  bool symbolic_batch = false;
  std::string then;       // an activation node after the conv ("Relu", "LeakyRelu", ...), fused by the optimizer
  bool residual = false;  // Add(conv, residual input) before `then`
};

int64_t OutChannels(const ConvCase& c) {
  int64_t group = 1;
  for (const auto& [name, v] : c.ints) {
    if (name == "group") group = v.at(0);
  }
  return c.op == "ConvTranspose" ? c.w[1] * group : c.w[0];
}

std::string ConvModel(const ConvCase& c, const Shape& residual_shape = {}) {
  ModelBuilder b;
  Shape in = c.x;
  if (c.symbolic_batch) in[0] = -1;
  b.Input("x", in);
  b.Initializer("w", c.w, Values(RandomFloats(c.w, 7, -0.5f, 0.5f)));
  std::vector<std::string> inputs{"x", "w"};
  if (c.bias) {
    Shape bs{OutChannels(c)};
    b.Initializer("b", bs, Values(RandomFloats(bs, 8)));
    inputs.push_back("b");
  }
  std::string y = c.residual || !c.then.empty() ? "conv" : "y";
  SetAttrs(b.Node(c.op, inputs, {y}, "conv0"), c.ints, c.auto_pad);
  if (c.residual) {
    Shape rs = residual_shape;
    if (c.symbolic_batch && !rs.empty()) rs[0] = -1;
    b.Input("r", rs);
    std::string sum = c.then.empty() ? "y" : "sum";
    b.Node("Add", {y, "r"}, {sum}, "add0");
    y = sum;
  }
  if (!c.then.empty()) {
    auto* act = b.Node(c.then, {y}, {"y"}, "act0");
    if (c.then == "LeakyRelu") FloatAttr(act, "alpha", 0.1f);
  }
  b.Output("y");
  return b.Serialize();
}

// Runs the case in every precision. `residual_shape` is the shape of the residual input.
void ExpectConvMatches(const ConvCase& c, const Shape& residual_shape = {}) {
  std::string model = ConvModel(c, residual_shape);
  Tensor x = RandomFloats(c.x, 1);
  Tensor r = RandomFloats(residual_shape.empty() ? Shape{1} : residual_shape, 2);
  std::vector<const Tensor*> inputs{&x};
  if (c.residual) inputs.push_back(&r);
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kFp16}) {
    SCOPED_TRACE(p == Precision::kFp32 ? "fp32" : p == Precision::kTf32 ? "tf32" : "fp16");
    ExpectCudaMatchesCpu(model, inputs, p, ToleranceFor(p));
  }
}

TEST(CudaConvTest, Basic3x3WithBias) {
  MF_SKIP_WITHOUT_GPU();
  ExpectConvMatches({.x = {2, 3, 9, 9}, .w = {8, 3, 3, 3}, .ints = {{"pads", {1, 1, 1, 1}}}});
}

TEST(CudaConvTest, StridesDilationsNoBias) {
  MF_SKIP_WITHOUT_GPU();
  ExpectConvMatches({.x = {1, 4, 17, 15},
                     .w = {6, 4, 3, 3},
                     .bias = false,
                     .ints = {{"strides", {2, 2}}, {"dilations", {2, 1}}, {"pads", {2, 1, 2, 1}}}});
}

TEST(CudaConvTest, GroupedAndDepthwise) {
  MF_SKIP_WITHOUT_GPU();
  ExpectConvMatches({.x = {2, 8, 10, 10}, .w = {12, 2, 3, 3}, .ints = {{"group", {4}}, {"pads", {1, 1, 1, 1}}}});
  ExpectConvMatches({.x = {2, 16, 12, 12},
                     .w = {16, 1, 3, 3},
                     .ints = {{"group", {16}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}});
}

TEST(CudaConvTest, AutoPadSameUpperLowerAndValid) {
  MF_SKIP_WITHOUT_GPU();
  // Stride 2 on even and odd sizes gives odd total padding: cuDNN needs the padded copy.
  for (int64_t size : {8, 9}) {
    for (const char* pad : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
      SCOPED_TRACE(std::string(pad) + " size " + std::to_string(size));
      ExpectConvMatches(
          {.x = {1, 3, size, size + 1}, .w = {4, 3, 3, 3}, .ints = {{"strides", {2, 2}}}, .auto_pad = pad});
      ExpectConvMatches({.x = {1, 3, size, size}, .w = {4, 3, 2, 2}, .auto_pad = pad});
    }
  }
}

TEST(CudaConvTest, AsymmetricExplicitPads) {
  MF_SKIP_WITHOUT_GPU();
  ExpectConvMatches({.x = {2, 3, 7, 8}, .w = {5, 3, 3, 2}, .ints = {{"pads", {0, 1, 2, 0}}}});
}

TEST(CudaConvTest, OneAndThreeSpatialDims) {
  MF_SKIP_WITHOUT_GPU();
  ExpectConvMatches({.x = {2, 4, 20}, .w = {6, 4, 5}, .ints = {{"strides", {2}}, {"pads", {2, 1}}}});
  ExpectConvMatches({.x = {1, 2, 6, 7, 5}, .w = {4, 2, 3, 3, 3}, .ints = {{"pads", {1, 1, 1, 1, 1, 1}}}});
}

TEST(CudaConvTest, FusedActivations) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* act : {"Relu", "LeakyRelu", "Sigmoid", "Tanh"}) {
    SCOPED_TRACE(act);
    ExpectConvMatches({.x = {2, 3, 9, 9}, .w = {8, 3, 3, 3}, .ints = {{"pads", {1, 1, 1, 1}}}, .then = act});
  }
  // Relu without a bias: the fused cuDNN call gets the kernel's zero bias.
  ExpectConvMatches({.x = {2, 3, 9, 9}, .w = {8, 3, 3, 3}, .bias = false, .then = "Relu"});
}

TEST(CudaConvTest, ResidualSumBeforeActivation) {
  MF_SKIP_WITHOUT_GPU();
  ConvCase c{.x = {2, 4, 8, 8}, .w = {4, 4, 3, 3}, .ints = {{"pads", {1, 1, 1, 1}}}, .then = "Relu", .residual = true};
  ExpectConvMatches(c, {2, 4, 8, 8});
  c.then = "";
  ExpectConvMatches(c, {2, 4, 8, 8});
  c.then = "Sigmoid";
  ExpectConvMatches(c, {2, 4, 8, 8});
  // A residual that broadcasts to the output (per-channel).
  c.then = "Relu";
  ExpectConvMatches(c, {1, 4, 1, 1});
}

TEST(CudaConvTest, SymbolicAndEmptyBatch) {
  MF_SKIP_WITHOUT_GPU();
  ConvCase c{
      .x = {3, 3, 8, 8}, .w = {4, 3, 3, 3}, .ints = {{"pads", {1, 1, 1, 1}}}, .symbolic_batch = true, .then = "Relu"};
  std::string model = ConvModel(c);
  for (int64_t batch : {3, 1, 5, 0}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    Tensor x = RandomFloats({batch, 3, 8, 8}, static_cast<uint32_t>(batch));
    ExpectCudaMatchesCpu(model, {&x}, Precision::kFp32, ToleranceFor(Precision::kFp32));
    ExpectCudaMatchesCpu(model, {&x}, Precision::kFp16, ToleranceFor(Precision::kFp16));
  }
}

// A ResNet-style stem and bottleneck: the layout pass may keep these activations channels-last
// between the convolutions and pools, exercising every NCHW/NHWC combination of the kernels.
TEST(CudaConvTest, ResNetBlockChain) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {-1, 3, 32, 32});
  auto init = [&](const std::string& name, const Shape& s, uint32_t seed) {
    b.Initializer(name, s, Values(RandomFloats(s, seed, -0.3f, 0.3f)));
  };
  init("w1", {16, 3, 7, 7}, 11);
  init("b1", {16}, 12);
  init("w2", {16, 16, 1, 1}, 13);
  init("w3", {16, 16, 3, 3}, 14);
  init("b3", {16}, 15);
  init("w4", {32, 16, 1, 1}, 16);
  auto* c1 = b.Node("Conv", {"x", "w1", "b1"}, {"c1"}, "stem");
  ModelBuilder::IntsAttr(c1, "strides", {2, 2});
  ModelBuilder::IntsAttr(c1, "pads", {3, 3, 3, 3});
  b.Node("Relu", {"c1"}, {"r1"});
  auto* mp = b.Node("MaxPool", {"r1"}, {"p1"}, "pool");
  ModelBuilder::IntsAttr(mp, "kernel_shape", {3, 3});
  ModelBuilder::IntsAttr(mp, "strides", {2, 2});
  ModelBuilder::IntsAttr(mp, "pads", {1, 1, 1, 1});
  b.Node("Conv", {"p1", "w2"}, {"c2"}, "reduce");
  b.Node("Relu", {"c2"}, {"r2"});
  auto* c3 = b.Node("Conv", {"r2", "w3", "b3"}, {"c3"}, "body");
  ModelBuilder::IntsAttr(c3, "pads", {1, 1, 1, 1});
  b.Node("Add", {"c3", "p1"}, {"s3"});
  b.Node("Relu", {"s3"}, {"r3"});
  auto* c4 = b.Node("Conv", {"r3", "w4"}, {"c4"}, "expand");
  ModelBuilder::IntsAttr(c4, "strides", {2, 2});
  auto* ap = b.Node("AveragePool", {"c4"}, {"a4"}, "avg");
  ModelBuilder::IntsAttr(ap, "kernel_shape", {2, 2});
  ModelBuilder::IntsAttr(ap, "pads", {0, 0, 1, 1});
  b.Node("GlobalAveragePool", {"a4"}, {"y"});
  b.Node("GlobalMaxPool", {"r3"}, {"z"});
  b.Output("y");
  b.Output("z");
  std::string model = b.Serialize();
  for (int64_t batch : {1, 4}) {
    Tensor x = RandomFloats({batch, 3, 32, 32}, 21);
    for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kFp16}) {
      ExpectCudaMatchesCpu(model, {&x}, p, ToleranceFor(p));
    }
  }
}

TEST(CudaConvTransposeTest, StridesOutputPaddingAndPads) {
  MF_SKIP_WITHOUT_GPU();
  ExpectConvMatches({.op = "ConvTranspose", .x = {2, 4, 5, 6}, .w = {4, 3, 3, 3}, .ints = {{"strides", {2, 2}}}});
  ExpectConvMatches({.op = "ConvTranspose",
                     .x = {1, 4, 5, 5},
                     .w = {4, 2, 3, 3},
                     .ints = {{"strides", {2, 2}}, {"output_padding", {1, 1}}, {"pads", {1, 1, 1, 1}}}});
  // Asymmetric pads: cuDNN computes the symmetric result and the kernel copies the box out.
  ExpectConvMatches({.op = "ConvTranspose",
                     .x = {1, 3, 4, 4},
                     .w = {3, 2, 4, 4},
                     .bias = false,
                     .ints = {{"strides", {2, 2}}, {"pads", {0, 2, 1, 1}}}});
}

TEST(CudaConvTransposeTest, AutoPadOutputShapeGroupsDilations) {
  MF_SKIP_WITHOUT_GPU();
  ExpectConvMatches({.op = "ConvTranspose",
                     .x = {1, 4, 5, 5},
                     .w = {4, 2, 3, 3},
                     .ints = {{"strides", {2, 2}}},
                     .auto_pad = "SAME_UPPER"});
  ExpectConvMatches({.op = "ConvTranspose",
                     .x = {1, 4, 5, 5},
                     .w = {4, 2, 3, 3},
                     .ints = {{"strides", {2, 2}}},
                     .auto_pad = "SAME_LOWER"});
  // An output_shape larger than the natural size extends the end with bias-only values.
  ExpectConvMatches({.op = "ConvTranspose",
                     .x = {1, 2, 3, 3},
                     .w = {2, 2, 3, 3},
                     .ints = {{"strides", {2, 2}}, {"output_shape", {7, 8}}}});
  ExpectConvMatches({.op = "ConvTranspose",
                     .x = {2, 6, 4, 5},
                     .w = {6, 2, 3, 3},
                     .ints = {{"group", {3}}, {"dilations", {2, 2}}, {"pads", {1, 1, 1, 1}}}});
  ExpectConvMatches({.op = "ConvTranspose", .x = {2, 3, 7}, .w = {3, 4, 3}, .ints = {{"strides", {3}}}});
}

struct PoolCase {
  std::string op;
  Shape x;
  IntAttrs ints;
  std::string auto_pad;
};

void ExpectPoolMatches(const PoolCase& c) {
  ModelBuilder b;
  Shape in = c.x;
  in[0] = -1;
  b.Input("x", in);
  SetAttrs(b.Node(c.op, {"x"}, {"y"}, "pool0"), c.ints, c.auto_pad);
  b.Output("y");
  std::string model = b.Serialize();
  Tensor x = RandomFloats(c.x, 3, -2.f, 2.f);
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    ExpectCudaMatchesCpu(model, {&x}, p, ToleranceFor(p));
  }
}

TEST(CudaPoolTest, MaxPoolVariants) {
  MF_SKIP_WITHOUT_GPU();
  ExpectPoolMatches(
      {"MaxPool", {2, 8, 16, 16}, {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}});
  ExpectPoolMatches({"MaxPool", {1, 3, 11, 10}, {{"kernel_shape", {3, 2}}, {"strides", {2, 2}}, {"ceil_mode", {1}}}});
  ExpectPoolMatches(
      {"MaxPool", {1, 3, 12, 12}, {{"kernel_shape", {2, 2}}, {"dilations", {2, 2}}, {"pads", {0, 1, 1, 0}}}});
  ExpectPoolMatches({"MaxPool", {1, 3, 9, 10}, {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}}, "SAME_UPPER"});
  ExpectPoolMatches({"MaxPool", {1, 3, 9, 10}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}}, "SAME_LOWER"});
  ExpectPoolMatches({"MaxPool", {2, 4, 13}, {{"kernel_shape", {3}}, {"strides", {2}}}});
  ExpectPoolMatches(
      {"MaxPool", {1, 2, 5, 6, 7}, {{"kernel_shape", {2, 2, 2}}, {"strides", {2, 2, 2}}, {"ceil_mode", {1}}}});
}

TEST(CudaPoolTest, AveragePoolVariants) {
  MF_SKIP_WITHOUT_GPU();
  for (int64_t include : {0, 1}) {
    SCOPED_TRACE("count_include_pad " + std::to_string(include));
    ExpectPoolMatches({"AveragePool",
                       {2, 4, 10, 10},
                       {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"count_include_pad", {include}}}});
    ExpectPoolMatches({"AveragePool",
                       {1, 3, 11, 9},
                       {{"kernel_shape", {3, 3}},
                        {"strides", {2, 2}},
                        {"pads", {0, 1, 1, 0}},
                        {"ceil_mode", {1}},
                        {"count_include_pad", {include}}}});
    ExpectPoolMatches({"AveragePool",
                       {1, 3, 9, 10},
                       {{"kernel_shape", {2, 3}}, {"strides", {2, 2}}, {"count_include_pad", {include}}},
                       "SAME_UPPER"});
  }
  ExpectPoolMatches({"AveragePool", {2, 4, 13}, {{"kernel_shape", {4}}, {"strides", {3}}}});
  ExpectPoolMatches({"AveragePool", {1, 2, 4, 6, 5}, {{"kernel_shape", {2, 3, 2}}}});
}

TEST(CudaPoolTest, GlobalPools) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    SCOPED_TRACE(op);
    ExpectPoolMatches({op, {2, 8, 7, 7}, {}});
    ExpectPoolMatches({op, {3, 5, 33}, {}});
    ExpectPoolMatches({op, {1, 4, 3, 4, 5}, {}});
    ExpectPoolMatches({op, {2, 3, 64, 64}, {}});
  }
}

TEST(CudaPoolTest, EmptyBatch) {
  MF_SKIP_WITHOUT_GPU();
  ExpectPoolMatches({"MaxPool", {0, 3, 8, 8}, {{"kernel_shape", {2, 2}}}});
  ExpectPoolMatches({"GlobalAveragePool", {0, 3, 8, 8}, {}});
}

// ---- Bind-time behaviour: no GPU needed (these factories only touch the device for
// channels-last weights and the zero bias of a bias-less fused ReLU) ----

struct Bound {
  Status status;
  std::vector<DataType> output_dtypes;
};

Bound BindCuda(const std::string& op, std::vector<std::optional<DataType>> dtypes, const Attributes& attrs = {},
               Precision precision = Precision::kFp32, int outputs = 1, bool fused_sum = false) {
  Node node;
  node.name = "n";
  node.op_type = op;
  node.attributes = attrs;
  node.fused_sum = fused_sum;
  for (size_t i = 0; i < dtypes.size(); ++i) node.inputs.push_back(dtypes[i] ? static_cast<int>(i) : kNoValue);
  for (int o = 0; o < outputs; ++o) node.outputs.push_back(100 + o);
  std::vector<const Tensor*> constants(dtypes.size(), nullptr);
  KernelInit init{node, 17, dtypes, constants, std::vector<bool>(dtypes.size(), false), false, precision};
  const KernelDef* def = cuda::CudaKernels().Find(op, 17);
  if (!def) return {NotFound(op + " is not registered"), {}};
  auto bound = def->factory(init);
  if (!bound.ok()) return {bound.status(), {}};
  return {Status::Ok(), bound->output_dtypes};
}

TEST(CudaConvBind, FamilyIsRegisteredForBothDeviceFloats) {
  const DataType f32 = DataType::kFloat32, f16 = DataType::kFloat16;
  for (const char* op : {"Conv", "ConvTranspose"}) {
    SCOPED_TRACE(op);
    Bound b = BindCuda(op, {f32, f32, f32});
    ASSERT_TRUE(b.status.ok()) << b.status.ToString();
    EXPECT_EQ(b.output_dtypes, std::vector<DataType>{f32});
    Bound h = BindCuda(op, {f16, f16, std::nullopt}, {}, Precision::kFp16);
    ASSERT_TRUE(h.status.ok()) << h.status.ToString();
    EXPECT_EQ(h.output_dtypes, std::vector<DataType>{f16});
  }
  for (const char* op : {"MaxPool", "AveragePool"}) {
    Attributes a;
    a.Set("kernel_shape", {std::vector<int64_t>{2, 2}});
    Bound h = BindCuda(op, {f16}, a, Precision::kFp16);
    ASSERT_TRUE(h.status.ok()) << op << ": " << h.status.ToString();
    EXPECT_EQ(h.output_dtypes, std::vector<DataType>{f16});
  }
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    Bound b = BindCuda(op, {f32});
    ASSERT_TRUE(b.status.ok()) << op << ": " << b.status.ToString();
  }
}

TEST(CudaConvBind, UnsupportedCombinationsFallBackAndBadAttributesAreRefused) {
  const DataType f32 = DataType::kFloat32;
  // Other element types, mixed types: UNIMPLEMENTED (the executor runs the CPU kernel).
  EXPECT_EQ(BindCuda("Conv", {DataType::kFloat64, DataType::kFloat64}).status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(BindCuda("Conv", {f32, DataType::kFloat16}).status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(BindCuda("MaxPool", {DataType::kInt8}).status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(BindCuda("GlobalMaxPool", {DataType::kFloat64}).status.code(), StatusCode::kUnimplemented);
  // MaxPool's Indices output.
  Attributes k;
  k.Set("kernel_shape", {std::vector<int64_t>{2, 2}});
  EXPECT_EQ(BindCuda("MaxPool", {f32}, k, Precision::kFp32, 2).status.code(), StatusCode::kUnimplemented);
  // Malformed attributes: the same errors as the CPU kernels.
  Attributes pad = k;
  pad.Set("auto_pad", {std::string("SAME")});
  EXPECT_EQ(BindCuda("MaxPool", {f32}, pad).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCuda("Conv", {f32, f32}, pad).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCuda("AveragePool", {f32}).status.code(), StatusCode::kInvalidArgument);  // no kernel_shape
  Attributes group;
  group.Set("group", {int64_t{0}});
  EXPECT_EQ(BindCuda("Conv", {f32, f32}, group).status.code(), StatusCode::kInvalidArgument);
  // A fused sum must come with the addend as input 3.
  EXPECT_EQ(BindCuda("Conv", {f32, f32, f32}, {}, Precision::kFp32, 1, true).status.code(), StatusCode::kInternal);
  EXPECT_TRUE(BindCuda("Conv", {f32, f32, std::nullopt, f32}, {}, Precision::kFp32, 1, true).status.ok());
}

}  // namespace
}  // namespace mf::runtime::testing
