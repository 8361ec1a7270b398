// CUDA reduction and normalization kernels (reduce.cu, reduce_norm.cu) against the CPU backend:
// every Reduce* op over contiguous, strided and all axes, keepdims/noop_with_empty_axes, axes as
// attribute and as input, integer types, ArgMax/ArgMin with ties, LayerNormalization (staged and
// unstaged rows, broadcast scale/bias, Mean/InvStdDev outputs) and BatchNormalization, in FP32
// and FP16, with empty tensors and symbolic batch dims.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "runtime/session.h"
#include "tests/unit/runtime/model_builder.h"

namespace mf::runtime::testing {
namespace {

using onnx::TensorProto;

void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

Tensor Ints32(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::AllocateUninitialized(DataType::kInt32, shape).value();
  for (int64_t i = 0; i < t.num_elements(); ++i)
    t.data<int32_t>()[i] = static_cast<int32_t>((i * 2654435761u + seed) % 201) - 100;
  return t;
}

Tensor Ints64(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::AllocateUninitialized(DataType::kInt64, shape).value();
  for (int64_t i = 0; i < t.num_elements(); ++i)
    t.data<int64_t>()[i] = static_cast<int64_t>((i * 40503u + seed) % 1001) - 500;
  return t;
}

void ExpectBoth(const ModelBuilder& b, const std::vector<const Tensor*>& inputs) {
  ExpectCudaMatchesCpu(b.Serialize(), inputs, Precision::kFp32);
  ExpectCudaMatchesCpu(b.Serialize(), inputs, Precision::kFp16, ToleranceFor(Precision::kFp16));
}

const char* const kReduceOps[] = {"ReduceSum", "ReduceMean", "ReduceMax",       "ReduceMin",    "ReduceProd",
                                  "ReduceL1",  "ReduceL2",   "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};

// Opset 17: axes are an attribute for every op but ReduceSum (an input since 13).
ModelBuilder ReduceModel(const std::string& op, const Shape& shape, const std::vector<int64_t>& axes, int64_t keepdims,
                         int64_t noop = 0, int elem = TensorProto::FLOAT) {
  ModelBuilder b(17);
  b.Input("x", shape, elem).Output("y", {}, elem);
  std::vector<std::string> inputs = {"x"};
  if (op == "ReduceSum" && !axes.empty()) {
    b.Int64Initializer("axes", {static_cast<int64_t>(axes.size())}, axes);
    inputs.push_back("axes");
  }
  auto* n = b.Node(op, inputs, {"y"});
  if (op != "ReduceSum" && !axes.empty()) ModelBuilder::IntsAttr(n, "axes", axes);
  ModelBuilder::IntAttr(n, "keepdims", keepdims);
  if (noop) ModelBuilder::IntAttr(n, "noop_with_empty_axes", noop);
  return b;
}

// Positive inputs keep ReduceLogSum defined; a narrow range keeps ReduceProd well conditioned.
Tensor ReduceInput(const std::string& op, const Shape& shape, uint32_t seed) {
  if (op == "ReduceLogSum" || op == "ReduceProd") return RandomFloats(shape, seed, 0.5f, 1.5f);
  return RandomFloats(shape, seed);
}

TEST(CudaReduce, EveryOpOverOneMiddleAxis) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : kReduceOps) {
    SCOPED_TRACE(op);
    ModelBuilder b = ReduceModel(op, {-1, 37, 5}, {1}, 1);
    Tensor x = ReduceInput(op, {2, 37, 5}, 1);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaReduce, EveryOpOverSeparatedAxesWithoutKeepdims) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : kReduceOps) {
    SCOPED_TRACE(op);
    ModelBuilder b = ReduceModel(op, {3, 4, 5, 6}, {0, -2}, 0);
    Tensor x = ReduceInput(op, {3, 4, 5, 6}, 2);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaReduce, EveryOpOverSeparatedAxesIncludingTheInnermost) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : kReduceOps) {
    SCOPED_TRACE(op);
    if (std::string(op) == "ReduceProd") continue;            // 320 terms: see below
    ModelBuilder b = ReduceModel(op, {8, 3, 40}, {0, 2}, 1);  // a block per output, strided rows
    Tensor x = ReduceInput(op, {8, 3, 40}, 23);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaReduce, EveryOpOverLongContiguousRows) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : kReduceOps) {
    SCOPED_TRACE(op);
    if (std::string(op) == "ReduceProd") continue;  // a product of 3000 terms under- or overflows
    ModelBuilder b = ReduceModel(op, {4, 3000}, {-1}, 1);
    Tensor x = ReduceInput(op, {4, 3000}, 3);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaReduce, AllAxesByDefaultAndNoopWithEmptyAxes) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax"}) {
    SCOPED_TRACE(op);
    Tensor x = RandomFloats({5, 7, 3}, 4);
    ExpectBoth(ReduceModel(op, {5, 7, 3}, {}, 1), {&x});
    ExpectBoth(ReduceModel(op, {5, 7, 3}, {}, 0), {&x});
  }
  // noop_with_empty_axes (ReduceSum's axes input at opset 13+): the input comes back unchanged.
  Tensor x = RandomFloats({5, 7, 3}, 5);
  ExpectBoth(ReduceModel("ReduceSum", {5, 7, 3}, {}, 1, 1), {&x});
}

TEST(CudaReduce, AxesAsInputFromOpset18) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceL2"}) {
    SCOPED_TRACE(op);
    ModelBuilder b(18);
    b.Input("x", {-1, 6, 8}).Output("y").Int64Initializer("axes", {2}, {-1, 1});
    ModelBuilder::IntAttr(b.Node(op, {"x", "axes"}, {"y"}), "keepdims", 0);
    Tensor x = RandomFloats({3, 6, 8}, 6);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaReduce, IntegerTypes) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean", "ReduceL1", "ReduceSumSquare"}) {
    SCOPED_TRACE(op);
    Tensor x32 = Ints32({4, 9, 3}, 7);
    ExpectCudaMatchesCpu(ReduceModel(op, {4, 9, 3}, {1}, 1, 0, TensorProto::INT32).Serialize(), {&x32});
    Tensor x64 = Ints64({4, 300}, 8);
    ExpectCudaMatchesCpu(ReduceModel(op, {4, 300}, {1}, 0, 0, TensorProto::INT64).Serialize(), {&x64});
  }
}

TEST(CudaReduce, EmptyReducedAndEmptyKeptDims) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceProd", "ReduceSumSquare"}) {
    SCOPED_TRACE(op);
    Tensor x = RandomFloats({3, 0, 2}, 9);
    ExpectBoth(ReduceModel(op, {3, 0, 2}, {1}, 1), {&x});  // every output is the initial value
    ExpectBoth(ReduceModel(op, {3, 0, 2}, {0}, 0), {&x});  // no outputs at all
  }
}

TEST(CudaReduce, SymbolicBatchAndRankZeroResult) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b = ReduceModel("ReduceMean", {-1, 16}, {0, 1}, 0);
  for (int64_t batch : {1, 9}) {
    Tensor x = RandomFloats({batch, 16}, 10);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaReduce, LogSumExpOfLargeValues) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b = ReduceModel("ReduceLogSumExp", {4, 50}, {1}, 1);
  Tensor x = RandomFloats({4, 50}, 11, 80.f, 100.f);  // exp overflows float but not double
  ExpectCudaMatchesCpu(b.Serialize(), {&x});
}

// ---- ArgMax, ArgMin ----

TEST(CudaReduce, ArgMaxArgMinAxesAndKeepdims) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (int64_t axis : {0, 1, -1}) {
      for (int64_t keepdims : {0, 1}) {
        ModelBuilder b;
        b.Input("x", {-1, 5, 7}).Output("y", {}, TensorProto::INT64);
        auto* n = b.Node(op, {"x"}, {"y"});
        ModelBuilder::IntAttr(n, "axis", axis);
        ModelBuilder::IntAttr(n, "keepdims", keepdims);
        Tensor x = RandomFloats({3, 5, 7}, 12);
        ExpectCudaMatchesCpu(b.Serialize(), {&x});
      }
    }
  }
}

TEST(CudaReduce, ArgMaxTiesAndSelectLastIndex) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (int64_t last : {0, 1}) {
      ModelBuilder b;
      b.Input("x", {3, 4}).Output("y", {}, TensorProto::INT64);
      auto* n = b.Node(op, {"x"}, {"y"});
      ModelBuilder::IntAttr(n, "axis", 1);
      ModelBuilder::IntAttr(n, "select_last_index", last);
      Tensor x = Floats({3, 4}, {1, 3, 3, 0, 2, 2, 2, 2, -1, 5, -1, 5});
      ExpectBoth(b, {&x});
    }
  }
}

TEST(CudaReduce, ArgMaxArgMinOfLongRowsWithTiesAndNaNs) {
  MF_SKIP_WITHOUT_GPU();
  const int64_t len = 3000;
  Tensor x = RandomFloats({4, len}, 22);
  float* p = x.data<float>();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Planted extremes (exact in float16 too, so both precisions agree). Row 0: each extreme three
  // times. Row 1: NaN first (the answer is 0). Row 2: NaNs elsewhere (never chosen), each
  // extreme twice. Row 3: all equal.
  for (int64_t i : {17, 1500, 2999}) p[i] = 5.f;
  for (int64_t i : {100, 200, 2000}) p[i] = -5.f;
  p[len] = nan;
  for (int64_t i : {7, 1024, 2999}) p[2 * len + i] = nan;
  for (int64_t i : {50, 2500}) p[2 * len + i] = 4.f;
  for (int64_t i : {60, 2600}) p[2 * len + i] = -4.f;
  for (int64_t i = 0; i < len; ++i) p[3 * len + i] = 0.25f;
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (int64_t last : {0, 1}) {
      ModelBuilder b;
      b.Input("x", {4, len}).Output("y", {}, TensorProto::INT64);
      auto* n = b.Node(op, {"x"}, {"y"});
      ModelBuilder::IntAttr(n, "axis", -1);
      ModelBuilder::IntAttr(n, "select_last_index", last);
      ExpectBoth(b, {&x});
    }
  }
}

TEST(CudaReduce, ArgMaxOfInt64) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {6, 40}, TensorProto::INT64).Output("y", {}, TensorProto::INT64);
  ModelBuilder::IntAttr(b.Node("ArgMax", {"x"}, {"y"}), "axis", 1);
  Tensor x = Ints64({6, 40}, 13);
  ExpectCudaMatchesCpu(b.Serialize(), {&x});
}

// ---- LayerNormalization ----

ModelBuilder LayerNormModel(const Shape& x, int64_t axis, const Shape& scale, const Shape& bias, int outputs) {
  ModelBuilder b(17);
  b.Input("x", x).Output("y");
  auto count = [](const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
  };
  std::vector<float> sv(static_cast<size_t>(count(scale))), bv(static_cast<size_t>(count(bias)));
  for (size_t i = 0; i < sv.size(); ++i) sv[i] = 0.5f + 0.01f * static_cast<float>(i % 50);
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = -0.2f + 0.02f * static_cast<float>(i % 30);
  b.Initializer("scale", scale, sv);
  std::vector<std::string> inputs = {"x", "scale"};
  if (!bias.empty()) {
    b.Initializer("bias", bias, bv);
    inputs.push_back("bias");
  }
  std::vector<std::string> outs = {"y"};
  if (outputs > 1) {
    b.Output("mean");
    outs.push_back("mean");
  }
  if (outputs > 2) {
    b.Output("inv");
    outs.push_back("inv");
  }
  auto* n = b.Node("LayerNormalization", inputs, outs);
  ModelBuilder::IntAttr(n, "axis", axis);
  FloatAttr(n, "epsilon", 1e-5f);
  return b;
}

TEST(CudaNorm, LayerNormBertShapeWithStatistics) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b = LayerNormModel({-1, 7, 768}, -1, {768}, {768}, 3);
  for (int64_t batch : {1, 4}) {
    Tensor x = RandomFloats({batch, 7, 768}, 14, -3.f, 5.f);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaNorm, LayerNormBroadcastScaleAndBiasOverSeveralDims) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b = LayerNormModel({3, 4, 5}, 1, {1, 5}, {5}, 1);
  Tensor x = RandomFloats({3, 4, 5}, 15);
  ExpectBoth(b, {&x});
  ModelBuilder c = LayerNormModel({3, 4, 5}, -2, {4, 5}, {}, 2);  // no bias
  ExpectBoth(c, {&x});
}

TEST(CudaNorm, LayerNormLongestStagedRowAndRowsTooLongForSharedMemory) {
  MF_SKIP_WITHOUT_GPU();
  for (int64_t cols : {12032, 12033, 20000}) {  // 12032: the longest row staged in shared memory
    SCOPED_TRACE(cols);
    ModelBuilder b = LayerNormModel({2, cols}, -1, {cols}, {cols}, 1);
    Tensor x = RandomFloats({2, cols}, 16);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaNorm, LayerNormTinyRowsAndEmptyBatch) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b = LayerNormModel({-1, 3}, -1, {3}, {3}, 1);
  Tensor x = RandomFloats({5, 3}, 17);
  ExpectBoth(b, {&x});
  Tensor empty = RandomFloats({0, 3}, 18);
  ExpectBoth(b, {&empty});
}

// ---- BatchNormalization ----

ModelBuilder BatchNormModel(const Shape& x, int64_t channels) {
  ModelBuilder b(15);
  b.Input("x", x).Output("y");
  std::vector<float> scale, bias, mean, var;
  for (int64_t c = 0; c < channels; ++c) {
    float f = static_cast<float>(c);
    scale.push_back(0.5f + 0.1f * f);
    bias.push_back(0.3f - 0.05f * f);
    mean.push_back(-0.2f + 0.07f * f);
    var.push_back(0.4f + 0.2f * f);
  }
  b.Initializer("s", {channels}, scale).Initializer("b", {channels}, bias);
  b.Initializer("m", {channels}, mean).Initializer("v", {channels}, var);
  FloatAttr(b.Node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"}), "epsilon", 1e-3f);
  return b;
}

TEST(CudaNorm, BatchNormNchwAndTwoDimensional) {
  MF_SKIP_WITHOUT_GPU();
  {
    ModelBuilder b = BatchNormModel({-1, 3, 4, 5}, 3);
    Tensor x = RandomFloats({2, 3, 4, 5}, 19);
    ExpectBoth(b, {&x});
    Tensor empty = RandomFloats({0, 3, 4, 5}, 20);
    ExpectBoth(b, {&empty});
  }
  {
    ModelBuilder b = BatchNormModel({-1, 6}, 6);
    Tensor x = RandomFloats({4, 6}, 21);
    ExpectBoth(b, {&x});
  }
}

}  // namespace
}  // namespace mf::runtime::testing
