// The CUDA elementwise kernels (src/runtime/cuda/elementwise*.cu): every registered op against
// the CPU backend in FP32 and FP16, with broadcasting, attributes, empty tensors and a symbolic
// batch dim. Each model is also checked to run entirely on the GPU (no CPU fallback), so a
// kernel that refuses a case it should cover fails here instead of silently passing through the
// CPU. The bind-time tests (types refused, errors mirrored from the CPU) need no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../runtime/model_builder.h"
#include "cuda_test_util.h"
#include "runtime/cuda/cuda_common.h"
#include "runtime/cuda/cuda_plan.h"
#include "runtime/graph/model_loader.h"

namespace mf::runtime::testing {
namespace {

using onnx::TensorProto;

constexpr Precision kPrecisions[] = {Precision::kFp32, Precision::kFp16};

void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

template <typename T>
Tensor Values(DataType dtype, const Shape& shape, const std::vector<T>& values) {
  Tensor t = Tensor::AllocateUninitialized(dtype, shape).value();
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), values.size());
  if (t.byte_size()) std::memcpy(t.raw_data(), values.data(), t.byte_size());
  return t;
}
Tensor Int32s(const Shape& shape, const std::vector<int32_t>& v) { return Values(DataType::kInt32, shape, v); }
Tensor Bools(const Shape& shape, const std::vector<uint8_t>& v) { return Values(DataType::kBool, shape, v); }
// Small whole numbers stored as float: exact in float16, so comparisons agree across precisions.
Tensor WholeFloats(const Shape& shape, uint32_t seed) {
  Tensor t = RandomFloats(shape, seed, -3.f, 3.f);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = std::round(t.data<float>()[i]);
  return t;
}

// Every node of `model` binds to a CUDA kernel (nothing falls back to the CPU).
void ExpectAllOnGpu(const std::string& model, Precision precision) {
  auto graph = LoadModelBytes(model, "");
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  SessionOptions options;
  options.backend = Backend::kCuda;
  options.precision = precision;
  auto plan = cuda::CudaPlan::Create(std::move(graph).value(), options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto& placement = (*plan)->placement();
  std::string ops;
  for (const auto& op : placement.fallback_ops) ops += op + " ";
  EXPECT_EQ(placement.fallback, 0) << "fell back to the CPU: " << ops;
  EXPECT_GT(placement.device, 0);
}

void Check(const std::string& model, const std::vector<const Tensor*>& inputs, Precision precision,
           Tolerance tolerance) {
  SCOPED_TRACE(precision == Precision::kFp16 ? "fp16" : "fp32");
  ExpectAllOnGpu(model, precision);
  ExpectCudaMatchesCpu(model, inputs, precision, tolerance);
}
void Check(const std::string& model, const std::vector<const Tensor*>& inputs, Precision precision) {
  Check(model, inputs, precision, ToleranceFor(precision));
}

// y = op(x) on float x of shape [batch, 5, 7] (symbolic batch).
std::string UnaryModel(const std::string& op, int64_t opset = 17, onnx::NodeProto** node = nullptr) {
  ModelBuilder b(opset);
  b.Input("x", {-1, 5, 7}).Output("y", {-1, 5, 7});
  auto* n = b.Node(op, {"x"}, {"y"});
  if (node) *node = n;
  return b.Serialize();
}

struct UnaryCase {
  const char* op;
  float lo, hi;  // input range (positive for Log/Sqrt)
};

TEST(CudaElementwise, UnaryFloatOps) {
  MF_SKIP_WITHOUT_GPU();
  const UnaryCase cases[] = {{"Relu", -2, 2},         {"LeakyRelu", -2, 2},   {"Elu", -2, 2},    {"Selu", -2, 2},
                             {"Sigmoid", -6, 6},      {"HardSigmoid", -4, 4}, {"Tanh", -3, 3},   {"Softplus", -25, 25},
                             {"Erf", -2, 2},          {"Exp", -4, 4},         {"Log", 0.05f, 5}, {"Sqrt", 0, 9},
                             {"Reciprocal", 0.5f, 4}, {"Floor", -5, 5},       {"Ceil", -5, 5},   {"Sin", -6, 6},
                             {"Cos", -6, 6},          {"Abs", -3, 3},         {"Neg", -3, 3},    {"Identity", -3, 3},
                             {"Round", -5, 5}};
  for (const UnaryCase& c : cases) {
    SCOPED_TRACE(c.op);
    std::string model = UnaryModel(c.op);
    Tensor x = RandomFloats({3, 5, 7}, 7, c.lo, c.hi);
    for (Precision p : kPrecisions) {
      // Floor/Ceil/Round of values rounded to float16 may land on the other side of an integer.
      if (p == Precision::kFp16 &&
          (std::string(c.op) == "Floor" || std::string(c.op) == "Ceil" || std::string(c.op) == "Round"))
        continue;
      Check(model, {&x}, p);
    }
  }
}

TEST(CudaElementwise, UnaryAttributes) {
  MF_SKIP_WITHOUT_GPU();
  struct Attr {
    const char* op;
    std::vector<std::pair<const char*, float>> attrs;
  };
  const Attr cases[] = {{"LeakyRelu", {{"alpha", 0.3f}}},
                        {"Elu", {{"alpha", 0.5f}}},
                        {"Selu", {{"alpha", 1.5f}, {"gamma", 2.f}}},
                        {"HardSigmoid", {{"alpha", 0.5f}, {"beta", 0.25f}}}};
  Tensor x = RandomFloats({2, 5, 7}, 11, -3.f, 3.f);
  for (const Attr& c : cases) {
    SCOPED_TRACE(c.op);
    onnx::NodeProto* node = nullptr;
    ModelBuilder b(17);
    b.Input("x", {-1, 5, 7}).Output("y", {-1, 5, 7});
    node = b.Node(c.op, {"x"}, {"y"});
    for (const auto& [name, v] : c.attrs) FloatAttr(node, name, v);
    for (Precision p : kPrecisions) Check(b.Serialize(), {&x}, p);
  }
}

TEST(CudaElementwise, RoundIsHalfToEven) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(17);
  b.Input("x", {8}).Output("y", {8});
  b.Node("Round", {"x"}, {"y"});
  Tensor x = Floats({8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4f, -2.6f});
  for (Precision p : kPrecisions) Check(b.Serialize(), {&x}, p, {0, 0});
}

TEST(CudaElementwise, EmptyTensors) {
  MF_SKIP_WITHOUT_GPU();
  Tensor x = RandomFloats({0, 5, 7}, 1);
  for (const char* op : {"Relu", "Sigmoid", "Neg", "Softmax", "Identity", "Clip"}) {
    SCOPED_TRACE(op);
    for (Precision p : kPrecisions) Check(UnaryModel(op), {&x}, p);
  }
  ModelBuilder b(17);
  b.Input("a", {-1, 3}).Input("c", {-1, 3}, TensorProto::BOOL).Output("y", {-1, 3});
  b.Node("Add", {"a", "a"}, {"s"});
  b.Node("Where", {"c", "s", "a"}, {"y"});
  Tensor a = RandomFloats({0, 3}, 2);
  Tensor c = Bools({0, 3}, {});
  for (Precision p : kPrecisions) Check(b.Serialize(), {&a, &c}, p);
}

TEST(CudaElementwise, IntegerNegAbsWrapLikeTheCpu) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"Neg", "Abs"}) {
    SCOPED_TRACE(op);
    {
      ModelBuilder b(17);
      b.Input("x", {5}, TensorProto::INT64).Output("y", {5}, TensorProto::INT64);
      b.Node(op, {"x"}, {"y"});
      Tensor x = Int64s({5}, {std::numeric_limits<int64_t>::min(), -3, 0, 4, std::numeric_limits<int64_t>::max()});
      Check(b.Serialize(), {&x}, Precision::kFp32);
    }
    {
      ModelBuilder b(17);
      b.Input("x", {4}, TensorProto::INT32).Output("y", {4}, TensorProto::INT32);
      b.Node(op, {"x"}, {"y"});
      Tensor x = Int32s({4}, {std::numeric_limits<int32_t>::min(), -7, 0, 9});
      Check(b.Serialize(), {&x}, Precision::kFp32);
    }
  }
}

// The numpy broadcast of two static shapes (test inputs are always compatible).
std::vector<int64_t> BroadcastDims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// a op b for a pair of shapes, both graph inputs.
std::string BinaryModel(const std::string& op, const std::vector<int64_t>& sa, const std::vector<int64_t>& sb,
                        int elem = TensorProto::FLOAT, int out_elem = TensorProto::FLOAT) {
  ModelBuilder b(17);
  b.Input("a", sa, elem).Input("b", sb, elem).Output("y", BroadcastDims(sa, sb), out_elem);
  b.Node(op, {"a", "b"}, {"y"});
  return b.Serialize();
}

struct ShapePair {
  Shape a, b;
};
const ShapePair kShapePairs[] = {
    {{2, 3, 4}, {2, 3, 4}},  // same shape
    {{2, 3, 4}, {}},         // scalar right
    {{1}, {2, 3, 4}},        // one-element left
    {{2, 1, 4}, {3, 1}},     // two-sided broadcast
    {{4}, {2, 3, 4}},        // left repeats along the leading dims
    {{2, 3, 4}, {1, 3, 4}},  // right repeats along the leading dims
};

std::vector<int64_t> Dims(const Shape& s) { return {s.begin(), s.end()}; }

TEST(CudaElementwise, ArithmeticBroadcasting) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"}) {
    SCOPED_TRACE(op);
    for (const ShapePair& s : kShapePairs) {
      SCOPED_TRACE(ShapeToString(s.a) + " " + ShapeToString(s.b));
      std::string model = BinaryModel(op, Dims(s.a), Dims(s.b));
      // Positive operands away from zero: Div and Pow stay well conditioned.
      Tensor a = RandomFloats(s.a, 3, 0.5f, 2.f);
      Tensor b = RandomFloats(s.b, 4, 0.5f, 2.f);
      for (Precision p : kPrecisions) Check(model, {&a, &b}, p);
    }
  }
}

TEST(CudaElementwise, SymbolicBatchBroadcast) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(17);
  b.Input("x", {-1, 4, 6}).Initializer("w", {6}, {1, -2, 3, -4, 5, -6}).Output("y", {-1, 4, 6});
  b.Node("Mul", {"x", "w"}, {"y"});
  for (int64_t batch : {1, 5}) {
    Tensor x = RandomFloats({batch, 4, 6}, 5);
    for (Precision p : kPrecisions) Check(b.Serialize(), {&x}, p);
  }
}

TEST(CudaElementwise, IntegerArithmeticTruncatesLikeTheCpu) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    SCOPED_TRACE(op);
    Tensor a = Int64s({2, 4}, {7, -7, 7, -7, 100, -100, 1, 0});
    Tensor b = Int64s({2, 4}, {2, 2, -2, -2, 7, 7, 3, 5});
    Check(BinaryModel(op, {2, 4}, {2, 4}, TensorProto::INT64, TensorProto::INT64), {&a, &b}, Precision::kFp32);
    Tensor a32 = Int32s({2, 4}, {7, -7, 7, -7, 100, -100, 1, 0});
    Tensor b32 = Int32s({1}, {-3});
    Check(BinaryModel(op, {2, 4}, {1}, TensorProto::INT32, TensorProto::INT32), {&a32, &b32}, Precision::kFp32);
  }
}

TEST(CudaElementwise, PowWithIntegerExponent) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(17);
  b.Input("x", {-1, 6}).Int64Initializer("e", {}, {3}).Output("y", {-1, 6});
  b.Node("Pow", {"x", "e"}, {"y"});
  Tensor x = RandomFloats({3, 6}, 9, -2.f, 2.f);
  for (Precision p : kPrecisions) Check(b.Serialize(), {&x}, p);
  // x^2 and x^0.5, the CPU kernel's fast paths.
  for (float e : {2.f, 0.5f}) {
    ModelBuilder q(17);
    q.Input("x", {-1, 6}).Initializer("e", {}, {e}).Output("y", {-1, 6});
    q.Node("Pow", {"x", "e"}, {"y"});
    Tensor xp = RandomFloats({3, 6}, 10, 0.f, 3.f);
    for (Precision p : kPrecisions) Check(q.Serialize(), {&xp}, p);
  }
}

TEST(CudaElementwise, Comparisons) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    SCOPED_TRACE(op);
    for (const ShapePair& s : kShapePairs) {
      std::string model = BinaryModel(op, Dims(s.a), Dims(s.b), TensorProto::FLOAT, TensorProto::BOOL);
      Tensor a = WholeFloats(s.a, 21);
      Tensor b = WholeFloats(s.b, 22);
      for (Precision p : kPrecisions) Check(model, {&a, &b}, p);
    }
    Tensor a = Int64s({2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor b = Int64s({3}, {2, 2, 6});
    Check(BinaryModel(op, {2, 3}, {3}, TensorProto::INT64, TensorProto::BOOL), {&a, &b}, Precision::kFp32);
  }
  Tensor a = Bools({4}, {0, 1, 0, 1});
  Tensor b = Bools({4}, {0, 0, 1, 1});
  Check(BinaryModel("Equal", {4}, {4}, TensorProto::BOOL, TensorProto::BOOL), {&a, &b}, Precision::kFp32);
}

TEST(CudaElementwise, Logic) {
  MF_SKIP_WITHOUT_GPU();
  Tensor a = Bools({2, 4}, {0, 1, 0, 1, 1, 1, 0, 0});
  Tensor b = Bools({4}, {0, 0, 1, 1});
  for (const char* op : {"And", "Or", "Xor"}) {
    SCOPED_TRACE(op);
    Check(BinaryModel(op, {2, 4}, {4}, TensorProto::BOOL, TensorProto::BOOL), {&a, &b}, Precision::kFp32);
    Check(BinaryModel(op, {2, 4}, {2, 4}, TensorProto::BOOL, TensorProto::BOOL), {&a, &a}, Precision::kFp32);
  }
  ModelBuilder n(17);
  n.Input("a", {2, 4}, TensorProto::BOOL).Output("y", {2, 4}, TensorProto::BOOL);
  n.Node("Not", {"a"}, {"y"});
  Check(n.Serialize(), {&a}, Precision::kFp32);
}

TEST(CudaElementwise, VariadicFolds) {
  MF_SKIP_WITHOUT_GPU();
  Tensor x = RandomFloats({2, 3}, 31);
  Tensor y = RandomFloats({3}, 32);
  Tensor z = RandomFloats({1}, 33);
  for (const char* op : {"Sum", "Mean", "Max", "Min"}) {
    SCOPED_TRACE(op);
    ModelBuilder b(17);
    b.Input("x", {-1, 3}).Input("y", {3}).Input("z", {1}).Output("o", {-1, 3});
    b.Node(op, {"x", "y", "z"}, {"o"});
    for (Precision p : kPrecisions) Check(b.Serialize(), {&x, &y, &z}, p);
    ModelBuilder one(17);
    one.Input("x", {-1, 3}).Output("o", {-1, 3});
    one.Node(op, {"x"}, {"o"});
    for (Precision p : kPrecisions) Check(one.Serialize(), {&x}, p);
  }
  ModelBuilder ints(17);
  ints.Input("x", {3}, TensorProto::INT64).Input("y", {3}, TensorProto::INT64).Output("o", {3}, TensorProto::INT64);
  ints.Node("Sum", {"x", "y", "x"}, {"o"});
  Tensor xi = Int64s({3}, {1, -2, 3});
  Tensor yi = Int64s({3}, {10, 20, -30});
  Check(ints.Serialize(), {&xi, &yi}, Precision::kFp32);
}

TEST(CudaElementwise, PRelu) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(17);
  b.Input("x", {-1, 3, 4, 5}).Initializer("s", {3, 1, 1}, {0.1f, 0.2f, -0.5f}).Output("y", {-1, 3, 4, 5});
  b.Node("PRelu", {"x", "s"}, {"y"});
  Tensor x = RandomFloats({2, 3, 4, 5}, 41);
  for (Precision p : kPrecisions) Check(b.Serialize(), {&x}, p);
}

TEST(CudaElementwise, WhereBroadcastsThreeWays) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(17);
  b.Input("c", {4}, TensorProto::BOOL).Input("x", {-1, 3, 1}).Input("y", {3, 4}).Output("o", {-1, 3, 4});
  b.Node("Where", {"c", "x", "y"}, {"o"});
  Tensor c = Bools({4}, {1, 0, 0, 1});
  Tensor x = RandomFloats({2, 3, 1}, 51);
  Tensor y = RandomFloats({3, 4}, 52);
  for (Precision p : kPrecisions) Check(b.Serialize(), {&c, &x, &y}, p);

  ModelBuilder i(17);
  i.Input("c", {2, 3}, TensorProto::BOOL).Input("x", {2, 3}, TensorProto::INT64).Input("y", {2, 3}, TensorProto::INT64);
  i.Output("o", {2, 3}, TensorProto::INT64);
  i.Node("Where", {"c", "x", "y"}, {"o"});
  Tensor ci = Bools({2, 3}, {1, 0, 1, 0, 1, 0});
  Tensor xi = Int64s({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor yi = Int64s({2, 3}, {-1, -2, -3, -4, -5, -6});
  Check(i.Serialize(), {&ci, &xi, &yi}, Precision::kFp32);
}

TEST(CudaElementwise, ClipInputsAndAttributes) {
  MF_SKIP_WITHOUT_GPU();
  Tensor x = RandomFloats({3, 5, 7}, 61, -3.f, 3.f);
  {
    ModelBuilder b(13);  // min/max as inputs
    b.Input("x", {-1, 5, 7}).Initializer("lo", {}, {-0.5f}).Initializer("hi", {}, {1.25f}).Output("y", {-1, 5, 7});
    b.Node("Clip", {"x", "lo", "hi"}, {"y"});
    for (Precision p : kPrecisions) Check(b.Serialize(), {&x}, p);
  }
  {
    ModelBuilder b(13);  // only max: min omitted
    b.Input("x", {-1, 5, 7}).Initializer("hi", {}, {0.75f}).Output("y", {-1, 5, 7});
    b.Node("Clip", {"x", "", "hi"}, {"y"});
    for (Precision p : kPrecisions) Check(b.Serialize(), {&x}, p);
  }
  {
    ModelBuilder b(6);  // attributes before opset 11
    b.Input("x", {-1, 5, 7}).Output("y", {-1, 5, 7});
    auto* n = b.Node("Clip", {"x"}, {"y"});
    FloatAttr(n, "min", 0.f);
    FloatAttr(n, "max", 6.f);
    for (Precision p : kPrecisions) Check(b.Serialize(), {&x}, p);
  }
}

TEST(CudaElementwise, Cast) {
  MF_SKIP_WITHOUT_GPU();
  Tensor x = Floats({6}, {-2.5f, -0.f, 0.4f, 1.f, 3.75f, 1e20f});
  for (int to : {TensorProto::INT64, TensorProto::INT32, TensorProto::BOOL, TensorProto::DOUBLE}) {
    SCOPED_TRACE(to);
    ModelBuilder b(17);
    b.Input("x", {6}).Output("y", {6}, to);
    ModelBuilder::IntAttr(b.Node("Cast", {"x"}, {"y"}), "to", to);
    // FP16 turns 1e20 into inf before the cast; the float32 run is the exact check.
    Check(b.Serialize(), {&x}, Precision::kFp32);
  }
  ModelBuilder f(17);
  f.Input("x", {-1, 3}, TensorProto::INT64).Output("y", {-1, 3});
  ModelBuilder::IntAttr(f.Node("Cast", {"x"}, {"y"}), "to", TensorProto::FLOAT);
  Tensor xi = Int64s({2, 3}, {-3, 0, 1, 2, 100, -7});
  for (Precision p : kPrecisions) Check(f.Serialize(), {&xi}, p);
}

TEST(CudaElementwise, DropoutIsIdentityWithAnAllTrueMask) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(12);
  b.Input("x", {-1, 4}).Output("y", {-1, 4}).Output("mask", {-1, 4}, TensorProto::BOOL);
  b.Node("Dropout", {"x"}, {"y", "mask"});
  Tensor x = RandomFloats({3, 4}, 71);
  for (Precision p : kPrecisions) Check(b.Serialize(), {&x}, p);
}

TEST(CudaElementwise, SoftmaxAxesAndOpsets) {
  MF_SKIP_WITHOUT_GPU();
  struct Case {
    const char* op;
    int64_t opset;
    std::optional<int64_t> axis;
    Shape shape;
  };
  const Case cases[] = {
      {"Softmax", 13, std::nullopt, {3, 1000}},  // rows longer than a block
      {"Softmax", 13, 1, {2, 5, 3, 4}},          // strided rows (inner > 1)
      {"Softmax", 13, -3, {2, 5, 3, 4}},
      {"Softmax", 11, std::nullopt, {2, 3, 4, 5}},  // coerced to 2-D at axis 1
      {"Softmax", 11, 2, {2, 3, 4, 5}},
      {"LogSoftmax", 13, std::nullopt, {4, 7}},
      {"LogSoftmax", 13, 0, {4, 7}},
      {"LogSoftmax", 11, std::nullopt, {2, 3, 300}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.op) + " opset " + std::to_string(c.opset) + " " + ShapeToString(c.shape));
    ModelBuilder b(c.opset);
    std::vector<int64_t> dims = Dims(c.shape);
    dims[0] = -1;
    b.Input("x", dims).Output("y", dims);
    auto* n = b.Node(c.op, {"x"}, {"y"});
    if (c.axis) ModelBuilder::IntAttr(n, "axis", *c.axis);
    Tensor x = RandomFloats(c.shape, 81, -8.f, 8.f);
    for (Precision p : kPrecisions) Check(b.Serialize(), {&x}, p);
  }
}

// ---- Bind-time behaviour: no GPU needed (factories do not touch the device) ----

struct BindResult {
  Status status;
  std::vector<DataType> output_dtypes;
};

BindResult BindCuda(const std::string& op, int64_t opset, std::vector<std::optional<DataType>> dtypes,
                    const Attributes& attrs = {}, std::vector<const Tensor*> constants = {},
                    Precision precision = Precision::kFp32, int outputs = 1) {
  Node node;
  node.name = "n";
  node.op_type = op;
  node.attributes = attrs;
  for (size_t i = 0; i < dtypes.size(); ++i) node.inputs.push_back(dtypes[i] ? static_cast<int>(i) : kNoValue);
  for (int o = 0; o < outputs; ++o) node.outputs.push_back(100 + o);
  constants.resize(dtypes.size(), nullptr);
  KernelInit init{node, opset, dtypes, constants, std::vector<bool>(dtypes.size(), false), false, precision};
  const KernelDef* def = cuda::CudaKernels().Find(op, opset);
  if (!def) return {NotFound(op + " is not registered"), {}};
  auto bound = def->factory(init);
  if (!bound.ok()) return {bound.status(), {}};
  return {Status::Ok(), bound->output_dtypes};
}

TEST(CudaElementwiseBind, EveryOpOfTheFamilyIsRegistered) {
  for (const char* op : {"Relu",       "LeakyRelu",   "Elu",
                         "Selu",       "Sigmoid",     "HardSigmoid",
                         "Tanh",       "Softplus",    "Erf",
                         "Exp",        "Log",         "Sqrt",
                         "Reciprocal", "Floor",       "Ceil",
                         "Round",      "Sin",         "Cos",
                         "Abs",        "Neg",         "Not",
                         "Identity",   "Dropout",     "Clip",
                         "Add",        "Sub",         "Mul",
                         "Div",        "Pow",         "Max",
                         "Min",        "Sum",         "Mean",
                         "PRelu",      "Equal",       "Less",
                         "Greater",    "LessOrEqual", "GreaterOrEqual",
                         "And",        "Or",          "Xor",
                         "Where",      "Cast",        "Softmax",
                         "LogSoftmax"}) {
    EXPECT_NE(cuda::CudaKernels().Find(op, 17), nullptr) << op;
  }
  const KernelDef* clip = cuda::CudaKernels().Find("Clip", 13);
  ASSERT_NE(clip, nullptr);
  EXPECT_EQ(clip->host_inputs, (std::vector<int>{1, 2}));
}

TEST(CudaElementwiseBind, FloatOpsTakeBothDeviceFloatTypesAndRefuseOthers) {
  for (const char* op : {"Relu", "Sigmoid", "Erf", "Softmax", "LogSoftmax", "Clip"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(BindCuda(op, 17, {DataType::kFloat32}).status.ok());
    BindResult half = BindCuda(op, 17, {DataType::kFloat16}, {}, {}, Precision::kFp16);
    ASSERT_TRUE(half.status.ok()) << half.status.ToString();
    EXPECT_EQ(half.output_dtypes, std::vector<DataType>{DataType::kFloat16});
    EXPECT_EQ(BindCuda(op, 17, {DataType::kInt32}).status.code(), StatusCode::kUnimplemented);
  }
}

TEST(CudaElementwiseBind, BinaryTypeRules) {
  EXPECT_EQ(BindCuda("Add", 17, {DataType::kFloat32, DataType::kInt64}).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCuda("Add", 17, {DataType::kUInt8, DataType::kUInt8}).status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(BindCuda("Add", 17, {DataType::kFloat32}).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCuda("Pow", 17, {DataType::kInt64, DataType::kInt64}).status.code(), StatusCode::kUnimplemented);
  BindResult pow = BindCuda("Pow", 17, {DataType::kFloat16, DataType::kInt64}, {}, {}, Precision::kFp16);
  ASSERT_TRUE(pow.status.ok()) << pow.status.ToString();
  EXPECT_EQ(pow.output_dtypes, std::vector<DataType>{DataType::kFloat16});
  BindResult less = BindCuda("Less", 17, {DataType::kInt64, DataType::kInt64});
  ASSERT_TRUE(less.status.ok());
  EXPECT_EQ(less.output_dtypes, std::vector<DataType>{DataType::kBool});
  EXPECT_TRUE(BindCuda("Equal", 17, {DataType::kBool, DataType::kBool}).status.ok());
  EXPECT_EQ(BindCuda("Less", 17, {DataType::kBool, DataType::kBool}).status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(BindCuda("And", 17, {DataType::kBool, DataType::kInt32}).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCuda("Mean", 17, {DataType::kInt64, DataType::kInt64}).status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(BindCuda("Sum", 17, {DataType::kFloat32, DataType::kFloat16}).status.code(), StatusCode::kInvalidArgument);
}

// Divisors computed on the device: the kernel raises the CPU kernel's errors as faults, and the
// run fails in every execution mode (eager, capture, replay) while good runs still pass.
TEST(CudaElementwise, IntegerDivisionFaultsOnDeviceDivisors) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("a", {3}, TensorProto::INT64).Input("d", {3}, TensorProto::INT64).Output("q", {3}, TensorProto::INT64);
  b.Node("Div", {"a", "d"}, {"q"});
  auto session = LoadCuda(b.Serialize());
  ASSERT_NE(session, nullptr);
  Tensor a = Int64s({3}, {7, -7, std::numeric_limits<int64_t>::min()});
  Tensor good = Int64s({3}, {2, 2, 2});
  Tensor zero = Int64s({3}, {2, 0, 2});
  Tensor minus_one = Int64s({3}, {2, 2, -1});
  for (int run = 0; run < 4; ++run) {
    std::vector<Tensor> out;
    Status s = session->Run({&a, &zero}, &out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("division by zero"), std::string::npos) << s.ToString();
    s = session->Run({&a, &minus_one}, &out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("overflows"), std::string::npos) << s.ToString();
    ASSERT_TRUE(session->Run({&a, &good}, &out).ok()) << "run " << run;
    EXPECT_EQ(out[0].data<int64_t>()[0], 3);
    EXPECT_EQ(out[0].data<int64_t>()[1], -3);
  }
}

TEST(CudaElementwiseBind, ConstantIntegerDivisorsAreCheckedLikeOnTheCpu) {
  Tensor zero = Int64s({2}, {3, 0});
  Status s = BindCuda("Div", 17, {DataType::kInt64, DataType::kInt64}, {}, {nullptr, &zero}).status;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("division by zero"), std::string::npos) << s.ToString();
  Tensor minus_one = Int64s({1}, {-1});
  Tensor min = Int64s({1}, {std::numeric_limits<int64_t>::min()});
  EXPECT_EQ(BindCuda("Div", 17, {DataType::kInt64, DataType::kInt64}, {}, {&min, &minus_one}).status.code(),
            StatusCode::kInvalidArgument);
  Tensor fine = Int64s({2}, {3, -1});
  EXPECT_TRUE(BindCuda("Div", 17, {DataType::kInt64, DataType::kInt64}, {}, {nullptr, &fine}).status.ok());
}

TEST(CudaElementwiseBind, CastTargets) {
  Attributes to_float;
  to_float.Set("to", Attribute{int64_t{TensorProto::FLOAT}});
  BindResult fp16 = BindCuda("Cast", 17, {DataType::kInt64}, to_float, {}, Precision::kFp16);
  ASSERT_TRUE(fp16.status.ok()) << fp16.status.ToString();
  EXPECT_EQ(fp16.output_dtypes, std::vector<DataType>{DataType::kFloat16});
  BindResult fp32 = BindCuda("Cast", 17, {DataType::kInt64}, to_float);
  ASSERT_TRUE(fp32.status.ok());
  EXPECT_EQ(fp32.output_dtypes, std::vector<DataType>{DataType::kFloat32});
  Attributes to_double;
  to_double.Set("to", Attribute{int64_t{TensorProto::DOUBLE}});
  BindResult dbl = BindCuda("Cast", 17, {DataType::kFloat16}, to_double, {}, Precision::kFp16);
  ASSERT_TRUE(dbl.status.ok());
  EXPECT_EQ(dbl.output_dtypes, std::vector<DataType>{DataType::kFloat64});
  for (int64_t code :
       {int64_t{TensorProto::STRING}, int64_t{TensorProto::BFLOAT16}, int64_t{TensorProto::FLOAT16}, int64_t{99}}) {
    Attributes a;
    a.Set("to", Attribute{code});
    EXPECT_EQ(BindCuda("Cast", 17, {DataType::kFloat32}, a).status.code(), StatusCode::kUnimplemented) << code;
  }
  EXPECT_EQ(BindCuda("Cast", 17, {DataType::kString}, to_float).status.code(), StatusCode::kUnimplemented);
}

TEST(CudaElementwiseBind, DropoutRefusesTrainingMode) {
  Tensor yes = Bools({}, {1});
  Tensor no = Bools({}, {0});
  Tensor ratio = Floats({}, {0.5f});
  std::vector<std::optional<DataType>> in{DataType::kFloat32, DataType::kFloat32, DataType::kBool};
  EXPECT_EQ(BindCuda("Dropout", 13, in, {}, {nullptr, &ratio, &yes}).status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(BindCuda("Dropout", 13, in, {}, {nullptr, &ratio, nullptr}).status.code(), StatusCode::kUnimplemented);
  BindResult ok = BindCuda("Dropout", 13, in, {}, {nullptr, &ratio, &no}, Precision::kFp32, 2);
  ASSERT_TRUE(ok.status.ok()) << ok.status.ToString();
  EXPECT_EQ(ok.output_dtypes, (std::vector<DataType>{DataType::kFloat32, DataType::kBool}));
}

TEST(CudaElementwiseBind, WhereAndVariadicValidation) {
  EXPECT_EQ(BindCuda("Where", 17, {DataType::kFloat32, DataType::kFloat32, DataType::kFloat32}).status.code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCuda("Where", 17, {DataType::kBool, DataType::kFloat32, DataType::kInt64}).status.code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(BindCuda("Where", 17, {DataType::kBool, DataType::kUInt8, DataType::kUInt8}).status.ok());
  EXPECT_EQ(BindCuda("Sum", 17, {DataType::kFloat32, std::nullopt}).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCuda("Neg", 17, {DataType::kUInt32}).status.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(BindCuda("Neg", 17, {DataType::kInt8}).status.ok());
}

}  // namespace
}  // namespace mf::runtime::testing
