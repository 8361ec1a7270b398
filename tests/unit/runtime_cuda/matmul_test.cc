// Gemm and MatMul on the CUDA backend (cuBLASLt) against the CPU backend: transposes, alpha and
// beta, every broadcast form of C (bias epilogue and general paths), fused activations, numpy
// batching with 1-D operands and partial broadcasting, symbolic and empty batches, in FP32,
// TF32 and FP16.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "runtime/cuda/cuda_common.h"
#include "tests/unit/runtime/model_builder.h"

namespace mf::runtime::testing {
namespace {

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

constexpr Precision kAllPrecisions[] = {Precision::kFp32, Precision::kTf32, Precision::kFp16};

struct GemmCase {
  int64_t m = 5, n = 7, k = 9;
  bool ta = false, tb = false;
  float alpha = 1.f, beta = 1.f;
  Shape c;  // empty: no C
  bool has_c = true;
  bool constant_b = true;
  std::string then;  // activation after the Gemm
};

void ExpectGemmMatches(const GemmCase& g) {
  ModelBuilder b;
  Shape sa = g.ta ? Shape{g.k, g.m} : Shape{g.m, g.k};
  Shape sb = g.tb ? Shape{g.n, g.k} : Shape{g.k, g.n};
  b.Input("a", {-1, sa[1]});
  std::vector<std::string> inputs{"a", "b"};
  Tensor bt = RandomFloats(sb, 5);
  if (g.constant_b) {
    b.Initializer("b", sb, Values(bt));
  } else {
    b.Input("b", sb);
  }
  if (g.has_c) {
    b.Initializer("c", g.c, Values(RandomFloats(g.c, 6)));
    inputs.push_back("c");
  }
  auto* node = b.Node("Gemm", inputs, {g.then.empty() ? "y" : "g"}, "gemm0");
  ModelBuilder::IntAttr(node, "transA", g.ta);
  ModelBuilder::IntAttr(node, "transB", g.tb);
  FloatAttr(node, "alpha", g.alpha);
  FloatAttr(node, "beta", g.beta);
  if (!g.then.empty()) b.Node(g.then, {"g"}, {"y"}, "act0");
  b.Output("y");
  std::string model = b.Serialize();
  Tensor a = RandomFloats(sa, 4);
  std::vector<const Tensor*> in{&a};
  if (!g.constant_b) in.push_back(&bt);
  for (Precision p : kAllPrecisions) {
    ExpectCudaMatchesCpu(model, in, p, ToleranceFor(p));
  }
}

TEST(CudaGemmTest, Transposes) {
  MF_SKIP_WITHOUT_GPU();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb));
      ExpectGemmMatches({.ta = ta, .tb = tb, .c = {7}});
      ExpectGemmMatches({.m = 33, .n = 64, .k = 48, .ta = ta, .tb = tb, .has_c = false});
    }
  }
}

TEST(CudaGemmTest, EveryFormOfC) {
  MF_SKIP_WITHOUT_GPU();
  for (const Shape& c : {Shape{}, Shape{7}, Shape{1, 7}, Shape{5, 1}, Shape{5, 7}, Shape{1, 1}}) {
    SCOPED_TRACE("C " + ShapeToString(c));
    ExpectGemmMatches({.c = c});                              // beta 1: the [N] forms use the bias epilogue
    ExpectGemmMatches({.alpha = 0.5f, .beta = 2.f, .c = c});  // beta != 1: the general path
    ExpectGemmMatches({.beta = 0.f, .c = c});                 // beta 0: C ignored
  }
}

TEST(CudaGemmTest, FusedActivationsAndRuntimeWeights) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* act : {"Relu", "LeakyRelu", "Sigmoid", "Tanh"}) {
    SCOPED_TRACE(act);
    ExpectGemmMatches({.tb = true, .c = {7}, .then = act});
    ExpectGemmMatches({.tb = true, .has_c = false, .then = act});
    ExpectGemmMatches({.c = {5, 7}, .then = act});
  }
  ExpectGemmMatches({.tb = true, .c = {7}, .constant_b = false});
}

TEST(CudaGemmTest, SymbolicAndEmptyBatch) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("a", {-1, 16});
  b.Initializer("b", {32, 16}, Values(RandomFloats({32, 16}, 9)));
  b.Initializer("c", {32}, Values(RandomFloats({32}, 10)));
  auto* node = b.Node("Gemm", {"a", "b", "c"}, {"g"}, "fc");
  ModelBuilder::IntAttr(node, "transB", 1);
  b.Node("Relu", {"g"}, {"y"});
  b.Output("y");
  std::string model = b.Serialize();
  for (int64_t batch : {1, 64, 3, 0}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    Tensor a = RandomFloats({batch, 16}, 11);
    for (Precision p : kAllPrecisions) ExpectCudaMatchesCpu(model, {&a}, p, ToleranceFor(p));
  }
}

// MatMul of a graph input `a` with either a second input or a constant `b`.
void ExpectMatMulMatches(const Shape& sa, const Shape& sb, bool constant_b, const std::string& then = "") {
  SCOPED_TRACE(ShapeToString(sa) + " x " + ShapeToString(sb) + (constant_b ? " (constant)" : ""));
  ModelBuilder b;
  b.Input("a", sa);
  Tensor bt = RandomFloats(sb, 13);
  if (constant_b) {
    b.Initializer("b", sb, Values(bt));
  } else {
    b.Input("b", sb);
  }
  b.Node("MatMul", {"a", "b"}, {then.empty() ? "y" : "mm"}, "mm0");
  if (!then.empty()) b.Node(then, {"mm"}, {"y"}, "act0");
  b.Output("y");
  std::string model = b.Serialize();
  Tensor a = RandomFloats(sa, 12);
  std::vector<const Tensor*> in{&a};
  if (!constant_b) in.push_back(&bt);
  for (Precision p : kAllPrecisions) ExpectCudaMatchesCpu(model, in, p, ToleranceFor(p));
}

TEST(CudaMatMulTest, MatricesAndVectors) {
  MF_SKIP_WITHOUT_GPU();
  ExpectMatMulMatches({6, 10}, {10, 12}, false);
  ExpectMatMulMatches({6, 10}, {10, 12}, true);
  ExpectMatMulMatches({10}, {10, 12}, false);        // 1-D left: [N]
  ExpectMatMulMatches({6, 10}, {10}, true);          // 1-D right: [M]
  ExpectMatMulMatches({10}, {10}, false);            // dot product: a scalar
  ExpectMatMulMatches({3, 10}, {4, 10, 12}, false);  // 1-D-batch broadcast of the left
}

TEST(CudaMatMulTest, BatchedAndBroadcast) {
  MF_SKIP_WITHOUT_GPU();
  ExpectMatMulMatches({4, 6, 10}, {4, 10, 12}, false);        // strided batches
  ExpectMatMulMatches({2, 3, 6, 10}, {10, 12}, true);         // shared weights: one folded GEMM
  ExpectMatMulMatches({2, 3, 6, 10}, {1, 1, 10, 12}, false);  // weights with unit batch dims
  ExpectMatMulMatches({6, 10}, {2, 3, 10, 12}, false);        // broadcast left operand
  ExpectMatMulMatches({2, 1, 6, 10}, {1, 3, 10, 12}, false);  // partial broadcasting: per-batch loop
  ExpectMatMulMatches({2, 4, 5, 8}, {4, 8, 3}, false);        // 3-D right operand broadcast over a 4-D batch
  ExpectMatMulMatches({3, 7, 9}, {9}, false);
}

TEST(CudaMatMulTest, FusedActivationAndLargeShapes) {
  MF_SKIP_WITHOUT_GPU();
  ExpectMatMulMatches({8, 128, 256}, {256, 384}, true, "Relu");
  ExpectMatMulMatches({8, 128, 64}, {8, 64, 128}, false, "Sigmoid");
}

TEST(CudaMatMulTest, SymbolicAndEmptyBatch) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("a", {-1, 5, 16});
  b.Initializer("b", {16, 8}, Values(RandomFloats({16, 8}, 14)));
  b.Node("MatMul", {"a", "b"}, {"y"}, "mm");
  b.Output("y");
  std::string model = b.Serialize();
  for (int64_t batch : {2, 7, 0}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    Tensor a = RandomFloats({batch, 5, 16}, 15);
    for (Precision p : kAllPrecisions) ExpectCudaMatchesCpu(model, {&a}, p, ToleranceFor(p));
  }
}

// ---- Bind-time behaviour: no GPU needed ----

StatusOr<BoundKernel> BindCuda(const std::string& op, std::vector<std::optional<DataType>> dtypes,
                               Precision precision = Precision::kFp32, const std::string& fused = "") {
  Node node;  // KernelInit refers to it only while the factory runs
  node.name = "n";
  node.op_type = op;
  node.fused_activation = fused;
  for (size_t i = 0; i < dtypes.size(); ++i) node.inputs.push_back(dtypes[i] ? static_cast<int>(i) : kNoValue);
  node.outputs.push_back(100);
  KernelInit init{node,
                  17,
                  dtypes,
                  std::vector<const Tensor*>(dtypes.size(), nullptr),
                  std::vector<bool>(dtypes.size(), false),
                  false,
                  precision};
  const KernelDef* def = cuda::CudaKernels().Find(op, 17);
  if (!def) return NotFound(op + " is not registered");
  return def->factory(init);
}

TEST(CudaMatMulBind, DeviceFloatsOnly) {
  const DataType f32 = DataType::kFloat32, f16 = DataType::kFloat16;
  for (const char* op : {"Gemm", "MatMul"}) {
    SCOPED_TRACE(op);
    auto b = BindCuda(op, {f32, f32});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(b->output_dtypes, std::vector<DataType>{f32});
    auto h = BindCuda(op, {f16, f16}, Precision::kFp16, "Relu");
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(h->output_dtypes, std::vector<DataType>{f16});
    EXPECT_EQ(BindCuda(op, {DataType::kInt32, DataType::kInt32}).status().code(), StatusCode::kUnimplemented);
    EXPECT_EQ(BindCuda(op, {DataType::kFloat64, DataType::kFloat64}).status().code(), StatusCode::kUnimplemented);
    EXPECT_EQ(BindCuda(op, {f32, f16}).status().code(), StatusCode::kUnimplemented);
    // A fused activation the GPU does not know: the CPU kernel takes the node.
    EXPECT_EQ(BindCuda(op, {f32, f32}, Precision::kFp32, "Gelu").status().code(), StatusCode::kUnimplemented);
  }
  EXPECT_TRUE(BindCuda("Gemm", {f32, f32, f32}).ok());
  EXPECT_EQ(BindCuda("Gemm", {f32, f32, DataType::kInt64}).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace mf::runtime::testing
