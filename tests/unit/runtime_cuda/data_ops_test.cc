// CUDA data-movement kernels (data_ops.cu, data_strided.cu, data_gather.cu, data_resize.cu)
// against the CPU backend: every op, its attribute and input variants, several element widths,
// FP32 and FP16, empty tensors and symbolic batch dims.
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

void StringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

Tensor Int32s(const Shape& shape, const std::vector<int32_t>& values) {
  Tensor t = Tensor::AllocateUninitialized(DataType::kInt32, shape).value();
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), values.size());
  std::memcpy(t.raw_data(), values.data(), t.byte_size());
  return t;
}

// Distinct int64 values 0, 1, 2, ... (exact comparisons catch any misplaced element).
Tensor Iota64(const Shape& shape) {
  Tensor t = Tensor::AllocateUninitialized(DataType::kInt64, shape).value();
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<int64_t>()[i] = i * 7 - 3;
  return t;
}

Tensor Iota8(const Shape& shape) {
  Tensor t = Tensor::AllocateUninitialized(DataType::kUInt8, shape).value();
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(i * 13 + 1);
  return t;
}

// Float models run in both precisions.
void ExpectBoth(const ModelBuilder& b, const std::vector<const Tensor*>& inputs) {
  ExpectCudaMatchesCpu(b.Serialize(), inputs, Precision::kFp32);
  ExpectCudaMatchesCpu(b.Serialize(), inputs, Precision::kFp16, ToleranceFor(Precision::kFp16));
}

// ---- Reshape, Flatten, Squeeze, Unsqueeze ----

TEST(CudaDataOps, ReshapeZeroAndInferredDimsWithSymbolicBatch) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {-1, 3, 4}).Output("y").Int64Initializer("shape", {3}, {0, -1, 2});
  b.Node("Reshape", {"x", "shape"}, {"y"});
  for (int64_t batch : {1, 5}) {
    Tensor x = RandomFloats({batch, 3, 4}, 1);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaDataOps, ReshapeAllowZeroOfAnEmptyTensor) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(14);
  b.Input("x", {2, 0, 3}).Output("y").Int64Initializer("shape", {2}, {3, 0});
  ModelBuilder::IntAttr(b.Node("Reshape", {"x", "shape"}, {"y"}), "allowzero", 1);
  Tensor x = RandomFloats({2, 0, 3}, 2);
  ExpectBoth(b, {&x});
}

TEST(CudaDataOps, ReshapeShapeFromAGraphInput) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {4, 6}).Input("shape", {2}, TensorProto::INT64).Output("y");
  b.Node("Reshape", {"x", "shape"}, {"y"});
  Tensor x = RandomFloats({4, 6}, 3);
  Tensor shape = Int64s({2}, {-1, 8});
  ExpectBoth(b, {&x, &shape});
}

TEST(CudaDataOps, FlattenAxes) {
  MF_SKIP_WITHOUT_GPU();
  for (int64_t axis : {0, 2, -1, 4}) {
    ModelBuilder b;
    b.Input("x", {-1, 3, 4, 5}).Output("y");
    ModelBuilder::IntAttr(b.Node("Flatten", {"x"}, {"y"}), "axis", axis);
    Tensor x = RandomFloats({2, 3, 4, 5}, 4);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaDataOps, SqueezeAndUnsqueezeAxesAsInputFromOpset13) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(13);
  b.Input("x", {-1, 1, 4, 1}).Output("y").Int64Initializer("sq", {2}, {1, -1}).Int64Initializer("unsq", {2}, {0, -1});
  b.Node("Squeeze", {"x", "sq"}, {"s"});
  b.Node("Unsqueeze", {"s", "unsq"}, {"y"});
  Tensor x = RandomFloats({3, 1, 4, 1}, 5);
  ExpectBoth(b, {&x});
}

TEST(CudaDataOps, SqueezeAllOnesAndUnsqueezeAxesAttributeBeforeOpset13) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(11);
  b.Input("x", {1, 4, 1}).Output("y");
  b.Node("Squeeze", {"x"}, {"s"});
  ModelBuilder::IntsAttr(b.Node("Unsqueeze", {"s"}, {"y"}), "axes", {2, 0});
  Tensor x = RandomFloats({1, 4, 1}, 6);
  ExpectBoth(b, {&x});
}

// ---- Transpose ----

TEST(CudaDataOps, TransposePermutations) {
  MF_SKIP_WITHOUT_GPU();
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {
      {{2, 8, 4, 16}, {0, 2, 1, 3}},             // attention heads
      {{4, 33, 65}, {0, 2, 1}},                  // batched last-two swap, partial tiles
      {{64, 96}, {1, 0}},                        // plain 2-D, full tiles
      {{2, 3, 40, 50}, {1, 0, 3, 2}},            // tiles with permuted batch dims
      {{3, 5, 7}, {}},                           // default: reversed dims
      {{2, 3, 1, 4, 5, 2}, {5, 3, 1, 0, 4, 2}},  // rank 6 with a unit dim
      {{6, 1}, {1, 0}},                          // a pure relabel
  };
  for (const Case& c : cases) {
    ModelBuilder b;
    b.Input("x", c.shape).Output("y");
    auto* n = b.Node("Transpose", {"x"}, {"y"});
    if (!c.perm.empty()) ModelBuilder::IntsAttr(n, "perm", c.perm);
    Tensor x = RandomFloats(c.shape, 7);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaDataOps, TransposeOfEightAndOneByteElements) {
  MF_SKIP_WITHOUT_GPU();
  {
    ModelBuilder b;
    b.Input("x", {5, 37, 3}, TensorProto::INT64).Output("y", {}, TensorProto::INT64);
    ModelBuilder::IntsAttr(b.Node("Transpose", {"x"}, {"y"}), "perm", {2, 0, 1});
    Tensor x = Iota64({5, 37, 3});
    ExpectCudaMatchesCpu(b.Serialize(), {&x});
  }
  {
    ModelBuilder b;
    b.Input("x", {3, 40, 50}, TensorProto::UINT8).Output("y", {}, TensorProto::UINT8);
    ModelBuilder::IntsAttr(b.Node("Transpose", {"x"}, {"y"}), "perm", {0, 2, 1});
    Tensor x = Iota8({3, 40, 50});
    ExpectCudaMatchesCpu(b.Serialize(), {&x});
  }
}

TEST(CudaDataOps, TransposeOfAnEmptyTensor) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {-1, 3, 4}).Output("y");
  ModelBuilder::IntsAttr(b.Node("Transpose", {"x"}, {"y"}), "perm", {2, 0, 1});
  Tensor x = RandomFloats({0, 3, 4}, 8);
  ExpectBoth(b, {&x});
}

// ---- Concat, Split ----

TEST(CudaDataOps, ConcatAlongEachAxis) {
  MF_SKIP_WITHOUT_GPU();
  for (int64_t axis : {0, 1, -1}) {
    ModelBuilder b;
    Shape sa = {2, 3, 4}, sb = {2, 3, 4}, sc = {2, 3, 4};
    size_t a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
    sb[a] = 5;
    sc[a] = 0;  // an empty input contributes nothing
    b.Input("a", sa).Input("b", sb).Input("c", sc).Output("y");
    ModelBuilder::IntAttr(b.Node("Concat", {"a", "b", "c", "a"}, {"y"}), "axis", axis);
    Tensor ta = RandomFloats(sa, 9), tb = RandomFloats(sb, 10), tc = RandomFloats(sc, 11);
    ExpectBoth(b, {&ta, &tb, &tc});
  }
}

TEST(CudaDataOps, ConcatOfInt64WithSymbolicBatch) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("a", {-1, 3}, TensorProto::INT64).Input("b", {-1, 2}, TensorProto::INT64).Output("y", {}, TensorProto::INT64);
  ModelBuilder::IntAttr(b.Node("Concat", {"a", "b"}, {"y"}), "axis", 1);
  Tensor ta = Iota64({4, 3}), tb = Iota64({4, 2});
  ExpectCudaMatchesCpu(b.Serialize(), {&ta, &tb});
}

TEST(CudaDataOps, SplitSizesFromInputFromOpset13) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b(13);
  b.Input("x", {-1, 10, 3}).Output("p").Output("q").Output("r").Int64Initializer("split", {3}, {2, 0, 8});
  ModelBuilder::IntAttr(b.Node("Split", {"x", "split"}, {"p", "q", "r"}), "axis", 1);
  Tensor x = RandomFloats({3, 10, 3}, 12);
  ExpectBoth(b, {&x});
}

TEST(CudaDataOps, SplitAttributeAndEqualParts) {
  MF_SKIP_WITHOUT_GPU();
  {
    ModelBuilder b(11);
    b.Input("x", {4, 6}).Output("p").Output("q");
    auto* n = b.Node("Split", {"x"}, {"p", "q"});
    ModelBuilder::IntAttr(n, "axis", -1);
    ModelBuilder::IntsAttr(n, "split", {4, 2});
    Tensor x = RandomFloats({4, 6}, 13);
    ExpectBoth(b, {&x});
  }
  {
    ModelBuilder b(13);
    b.Input("x", {5, 2}).Output("p").Output("q");
    b.Node("Split", {"x"}, {"p", "q"});  // uneven: 3 and 2
    Tensor x = RandomFloats({5, 2}, 14);
    ExpectBoth(b, {&x});
  }
}

// ---- Slice ----

TEST(CudaDataOps, SliceStepsClampingAndNegativeSteps) {
  MF_SKIP_WITHOUT_GPU();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const Case cases[] = {
      {{1, 0}, {kMax, -1}, {1, 2}, {2, 1}},
      {{-1, 8}, {-1000, -kMax}, {1, -1}, {-2, -3}},
      {{0}, {1}, {0}, {kMax}},
      {{5}, {2}, {2}, {1}},         // empty result
      {{-3, 1}, {100, 3}, {}, {}},  // default axes and steps
  };
  for (const Case& c : cases) {
    ModelBuilder b;
    b.Input("x", {-1, 7, 9}).Output("y");
    int64_t n = static_cast<int64_t>(c.starts.size());
    b.Int64Initializer("starts", {n}, c.starts).Int64Initializer("ends", {n}, c.ends);
    std::vector<std::string> inputs = {"x", "starts", "ends"};
    if (!c.axes.empty()) {
      b.Int64Initializer("axes", {n}, c.axes).Int64Initializer("steps", {n}, c.steps);
      inputs.push_back("axes");
      inputs.push_back("steps");
    }
    b.Node("Slice", inputs, {"y"});
    Tensor x = RandomFloats({4, 7, 9}, 15);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaDataOps, SliceOfInt64) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {6, 5}, TensorProto::INT64).Output("y", {}, TensorProto::INT64);
  b.Int64Initializer("starts", {2}, {-1, 1})
      .Int64Initializer("ends", {2}, {0, 5})
      .Int64Initializer("axes", {2}, {0, 1});
  b.Int64Initializer("steps", {2}, {-2, 3});
  b.Node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  Tensor x = Iota64({6, 5});
  ExpectCudaMatchesCpu(b.Serialize(), {&x});
}

// ---- Gather, GatherElements ----

TEST(CudaDataOps, GatherWithDeviceIndices) {
  MF_SKIP_WITHOUT_GPU();
  for (int64_t axis : {0, 1, -1}) {
    ModelBuilder b;
    b.Input("x", {5, 6, 4}).Input("i", {2, 3}, TensorProto::INT64).Output("y");
    ModelBuilder::IntAttr(b.Node("Gather", {"x", "i"}, {"y"}), "axis", axis);
    Tensor x = RandomFloats({5, 6, 4}, 16);
    Tensor i = Int64s({2, 3}, {0, -1, 3, 2, -4, 1});
    ExpectBoth(b, {&x, &i});
  }
}

TEST(CudaDataOps, GatherEmbeddingLookupWithInt32Indices) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("ids", {-1, 7}, TensorProto::INT32).Output("y");
  std::vector<float> table(50 * 16);
  for (size_t k = 0; k < table.size(); ++k) table[k] = static_cast<float>(k % 97) * 0.01f - 0.4f;
  b.Initializer("table", {50, 16}, table);
  b.Node("Gather", {"table", "ids"}, {"y"});
  Tensor ids = Int32s({2, 7}, {0, 1, 49, 7, -1, 3, 3, 10, 11, 12, -50, 48, 2, 0});
  ExpectBoth(b, {&ids});
}

TEST(CudaDataOps, GatherScalarIndexAndEmptyIndices) {
  MF_SKIP_WITHOUT_GPU();
  {
    ModelBuilder b;
    b.Input("x", {4, 3}).Output("y").Int64Initializer("i", {}, {-2});
    ModelBuilder::IntAttr(b.Node("Gather", {"x", "i"}, {"y"}), "axis", 0);
    Tensor x = RandomFloats({4, 3}, 17);
    ExpectBoth(b, {&x});
  }
  {
    ModelBuilder b;
    b.Input("x", {4, 3}).Input("i", {0}, TensorProto::INT64).Output("y");
    b.Node("Gather", {"x", "i"}, {"y"});
    Tensor x = RandomFloats({4, 3}, 18);
    Tensor i = Int64s({0}, {});
    ExpectBoth(b, {&x, &i});
  }
}

TEST(CudaDataOps, GatherRefusesOutOfRangeConstantIndicesLikeTheCpu) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {4, 3}).Output("y").Int64Initializer("i", {2}, {1, 4});
  b.Node("Gather", {"x", "i"}, {"y"});
  auto session = LoadCuda(b.Serialize());
  ASSERT_NE(session, nullptr);
  Tensor x = RandomFloats({4, 3}, 19);
  std::vector<Tensor> out;
  Status s = session->Run({&x}, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.ToString();
}

// Indices computed on the device are checked by the kernel: the run fails like the CPU's, in
// every execution mode (eager, the run that captures, replays), and good runs still pass after.
TEST(CudaDataOps, GatherRefusesOutOfRangeDeviceIndicesInEveryMode) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {4, 2}).Input("i", {3}, TensorProto::INT64).Output("y");
  b.Node("Gather", {"x", "i"}, {"y"});
  auto session = LoadCuda(b.Serialize());
  ASSERT_NE(session, nullptr);
  Tensor x = Floats({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Tensor good = Int64s({3}, {3, -4, -1});
  const std::vector<float> expected = {30, 31, 0, 1, 30, 31};
  for (int run = 0; run < 4; ++run) {
    for (const std::vector<int64_t>& bad : {std::vector<int64_t>{9, 0, 1}, std::vector<int64_t>{0, -5, 1}}) {
      Tensor i = Int64s({3}, bad);
      std::vector<Tensor> out;
      Status s = session->Run({&x, &i}, &out);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "run " << run << ": " << s.ToString();
      EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.ToString();
      EXPECT_NE(s.message().find("Gather"), std::string::npos) << s.ToString();
    }
    std::vector<Tensor> out;
    ASSERT_TRUE(session->Run({&x, &good}, &out).ok()) << "run " << run;
    ASSERT_EQ(out[0].shape(), (Shape{3, 2}));
    for (size_t k = 0; k < expected.size(); ++k) EXPECT_EQ(out[0].data<float>()[k], expected[k]) << k;
  }
}

TEST(CudaDataOps, GatherElementsRefusesOutOfRangeDeviceIndices) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {2, 3}).Input("i", {2, 2}, TensorProto::INT64).Output("y");
  ModelBuilder::IntAttr(b.Node("GatherElements", {"x", "i"}, {"y"}), "axis", 1);
  auto session = LoadCuda(b.Serialize());
  ASSERT_NE(session, nullptr);
  Tensor x = RandomFloats({2, 3}, 21);
  Tensor i = Int64s({2, 2}, {0, 1, 3, 0});
  std::vector<Tensor> out;
  Status s = session->Run({&x, &i}, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.ToString();
}

TEST(CudaDataOps, GatherElementsAlongEachAxis) {
  MF_SKIP_WITHOUT_GPU();
  for (int64_t axis : {0, 1}) {
    ModelBuilder b;
    b.Input("x", {3, 4}).Input("i", {2, 3}, TensorProto::INT64).Output("y");
    ModelBuilder::IntAttr(b.Node("GatherElements", {"x", "i"}, {"y"}), "axis", axis);
    Tensor x = RandomFloats({3, 4}, 20);
    Tensor i = Int64s({2, 3}, {0, -1, 2, 1, 0, -3});
    ExpectBoth(b, {&x, &i});
  }
}

// ---- Expand, Tile ----

TEST(CudaDataOps, ExpandBroadcasts) {
  MF_SKIP_WITHOUT_GPU();
  struct Case {
    Shape in;
    std::vector<int64_t> shape;
  };
  const Case cases[] = {{{3, 1}, {2, 3, 4}}, {{1, 4}, {1}}, {{2, 1, 5}, {2, 3, 1}}, {{3, 1}, {0, 3, 2}}};
  for (const Case& c : cases) {
    ModelBuilder b;
    b.Input("x", c.in).Output("y").Int64Initializer("shape", {static_cast<int64_t>(c.shape.size())}, c.shape);
    b.Node("Expand", {"x", "shape"}, {"y"});
    Tensor x = RandomFloats(c.in, 21);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaDataOps, TileRepeats) {
  MF_SKIP_WITHOUT_GPU();
  for (const std::vector<int64_t>& reps : {std::vector<int64_t>{2, 1, 3}, {1, 1, 1}, {3, 2, 0}}) {
    ModelBuilder b;
    b.Input("x", {-1, 3, 4}).Output("y").Int64Initializer("reps", {3}, reps);
    b.Node("Tile", {"x", "reps"}, {"y"});
    Tensor x = RandomFloats({2, 3, 4}, 22);
    ExpectBoth(b, {&x});
  }
}

// ---- Pad, Trilu ----

TEST(CudaDataOps, PadModes) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* mode : {"constant", "reflect", "edge"}) {
    ModelBuilder b;
    b.Input("x", {-1, 3, 4, 5}).Output("y").Int64Initializer("pads", {8}, {0, 0, 1, 2, 0, 1, 3, -1});
    b.Initializer("value", {}, {1.5f});
    StringAttr(b.Node("Pad", {"x", "pads", "value"}, {"y"}), "mode", mode);
    Tensor x = RandomFloats({2, 3, 4, 5}, 23);
    ExpectBoth(b, {&x});
  }
}

TEST(CudaDataOps, PadInt64WithDefaultValue) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {3, 2}, TensorProto::INT64)
      .Output("y", {}, TensorProto::INT64)
      .Int64Initializer("pads", {4}, {1, 0, 2, 3});
  b.Node("Pad", {"x", "pads"}, {"y"});
  Tensor x = Iota64({3, 2});
  ExpectCudaMatchesCpu(b.Serialize(), {&x});
}

TEST(CudaDataOps, TriluUpperLowerAndExtremeK) {
  MF_SKIP_WITHOUT_GPU();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int64_t upper : {0, 1}) {
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{-2}, kMax, -kMax}) {
      ModelBuilder b(14);
      b.Input("x", {-1, 4, 6}).Output("y").Int64Initializer("k", {}, {k});
      ModelBuilder::IntAttr(b.Node("Trilu", {"x", "k"}, {"y"}), "upper", upper);
      Tensor x = RandomFloats({2, 4, 6}, 24);
      ExpectBoth(b, {&x});
    }
  }
}

// ---- Resize ----

struct ResizeCase {
  std::string mode, transform, nearest_mode;
  std::vector<float> scales;  // or
  std::vector<int64_t> sizes;
  std::vector<float> roi;
};

void CheckResize(const ResizeCase& c, const Shape& in_shape) {
  ModelBuilder b;
  b.Input("x", in_shape).Output("y");
  int64_t rank = static_cast<int64_t>(in_shape.size());
  std::string roi = "", scales = "", sizes = "";
  if (!c.roi.empty()) b.Initializer(roi = "roi", {2 * rank}, c.roi);
  if (!c.scales.empty()) b.Initializer(scales = "scales", {rank}, c.scales);
  if (!c.sizes.empty()) b.Int64Initializer(sizes = "sizes", {rank}, c.sizes);
  std::vector<std::string> inputs = {"x", roi, scales};
  if (!sizes.empty()) inputs.push_back(sizes);
  auto* n = b.Node("Resize", inputs, {"y"});
  StringAttr(n, "mode", c.mode);
  StringAttr(n, "coordinate_transformation_mode", c.transform);
  if (!c.nearest_mode.empty()) StringAttr(n, "nearest_mode", c.nearest_mode);
  if (c.transform == "tf_crop_and_resize") FloatAttr(n, "extrapolation_value", -7.f);
  Tensor x = RandomFloats(in_shape, 25);
  SCOPED_TRACE(c.mode + " " + c.transform + " " + c.nearest_mode);
  ExpectBoth(b, {&x});
}

TEST(CudaDataOps, ResizeNearestModes) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
    for (const char* transform :
         {"half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn", "pytorch_half_pixel"}) {
      CheckResize({"nearest", transform, nearest, {1.f, 1.f, 2.f, 3.f}, {}, {}}, {2, 3, 4, 5});
      CheckResize({"nearest", transform, nearest, {}, {2, 3, 3, 7}, {}}, {2, 3, 4, 5});
    }
  }
}

TEST(CudaDataOps, ResizeLinearTransforms) {
  MF_SKIP_WITHOUT_GPU();
  for (const char* transform : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
    CheckResize({"linear", transform, "", {1.f, 1.f, 1.5f, 0.5f}, {}, {}}, {2, 3, 6, 8});
    CheckResize({"linear", transform, "", {}, {1, 3, 1, 17}, {}}, {2, 3, 6, 8});
  }
}

TEST(CudaDataOps, ResizeTfCropAndResizeExtrapolates) {
  MF_SKIP_WITHOUT_GPU();
  CheckResize({"linear", "tf_crop_and_resize", "", {}, {1, 1, 5, 6}, {0, 0, -0.2f, 0.1f, 1, 1, 0.8f, 1.3f}},
              {1, 1, 6, 8});
  CheckResize({"nearest", "tf_crop_and_resize", "", {}, {1, 1, 5, 6}, {0, 0, 0.2f, -0.1f, 1, 1, 0.9f, 0.7f}},
              {1, 1, 6, 8});
}

TEST(CudaDataOps, ResizeCubicFallsBackToTheCpuKernel) {
  MF_SKIP_WITHOUT_GPU();
  CheckResize({"cubic", "half_pixel", "", {1.f, 1.f, 2.f, 2.f}, {}, {}}, {1, 2, 4, 4});
}

TEST(CudaDataOps, ResizeWithSymbolicBatch) {
  MF_SKIP_WITHOUT_GPU();
  ModelBuilder b;
  b.Input("x", {-1, 3, 4, 4}).Output("y").Initializer("scales", {4}, {1.f, 1.f, 2.f, 2.f});
  StringAttr(b.Node("Resize", {"x", "", "scales"}, {"y"}), "mode", "linear");
  for (int64_t batch : {1, 3}) {
    Tensor x = RandomFloats({batch, 3, 4, 4}, 26);
    ExpectBoth(b, {&x});
  }
}

}  // namespace
}  // namespace mf::runtime::testing
