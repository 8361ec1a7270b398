// The loader refuses malformed and hostile models with a clear error, and never crashes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/session.h"
#include "tests/unit/runtime/model_builder.h"

namespace mf::runtime {
namespace {

using testing::ModelBuilder;

StatusOr<std::unique_ptr<Session>> LoadBytes(const std::string& bytes, const std::string& dir = "") {
  return Session::LoadFromBytes(bytes, dir, SessionOptions{});
}

ModelBuilder ReluModel() {
  ModelBuilder b;
  b.Input("x", {-1, 4}).Output("y");
  b.Node("Relu", {"x"}, {"y"}, "relu");
  return b;
}

TEST(ModelLoaderTest, LoadsAValidModelAndReportsItsSignature) {
  auto s = LoadBytes(ReluModel().Serialize());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const Signature& sig = (*s)->signature();
  ASSERT_EQ(sig.inputs.size(), 1u);
  EXPECT_EQ(sig.inputs[0].name, "x");
  EXPECT_EQ(sig.inputs[0].shape, (Shape{-1, 4}));
  EXPECT_EQ(sig.outputs[0].name, "y");
  EXPECT_EQ(sig.InputIndex("x"), 0);
  EXPECT_EQ(sig.InputIndex("nope"), -1);
}

TEST(ModelLoaderTest, RefusesBytesThatAreNotAModel) {
  auto s = LoadBytes("definitely not protobuf \xff\xff\xff");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelLoaderTest, RefusesTruncatedModels) {
  std::string bytes = ReluModel().Serialize();
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    auto s = LoadBytes(bytes.substr(0, cut));
    EXPECT_FALSE(s.ok()) << "truncated at " << cut;  // must fail cleanly, never crash
  }
}

TEST(ModelLoaderTest, NamesTheUnknownOperator) {
  ModelBuilder b;
  b.Input("x", {2}).Output("y");
  b.Node("FrobnicateV9", {"x"}, {"y"}, "mystery");
  auto s = LoadBytes(b.Serialize());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.status().message().find("node 'mystery' (FrobnicateV9)"), std::string::npos) << s.status().message();
}

TEST(ModelLoaderTest, NamesAMissingInput) {
  ModelBuilder b;
  b.Input("x", {2}).Output("y");
  b.Node("Add", {"x", "ghost"}, {"y"}, "add");
  auto s = LoadBytes(b.Serialize());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("'ghost'"), std::string::npos) << s.status().message();
}

TEST(ModelLoaderTest, RefusesCycles) {
  ModelBuilder b;
  b.Input("x", {2}).Output("b");
  b.Node("Add", {"x", "b"}, {"a"}, "first");
  b.Node("Relu", {"a"}, {"b"}, "second");
  auto s = LoadBytes(b.Serialize());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cycle"), std::string::npos) << s.status().message();
}

TEST(ModelLoaderTest, RefusesValuesDefinedTwice) {
  ModelBuilder b;
  b.Input("x", {2}).Output("y");
  b.Node("Relu", {"x"}, {"y"}, "one");
  b.Node("Relu", {"x"}, {"y"}, "two");
  auto s = LoadBytes(b.Serialize());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("more than once"), std::string::npos) << s.status().message();
}

TEST(ModelLoaderTest, AcceptsNodesOutOfTopologicalOrder) {
  ModelBuilder b;
  b.Input("x", {2}).Output("z");
  b.Node("Relu", {"y"}, {"z"}, "second");
  b.Node("Neg", {"x"}, {"y"}, "first");
  auto s = LoadBytes(b.Serialize());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto x = Tensor::FromBytes(DataType::kFloat32, {2}, std::string("\x00\x00\x80\x3f\x00\x00\x80\xbf", 8));  // 1, -1
  ASSERT_TRUE(x.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*s)->Run({&*x}, &out).ok());
  EXPECT_EQ(out[0].data<float>()[0], 0.f);
  EXPECT_EQ(out[0].data<float>()[1], 1.f);
}

TEST(ModelLoaderTest, RefusesInitializerWhoseDataDoesNotMatchItsShape) {
  ModelBuilder b;
  b.Input("x", {2}).Output("y").Initializer("w", {1000000, 1000000}, {1.f, 2.f});
  b.Node("Add", {"x", "w"}, {"y"});
  auto s = LoadBytes(b.Serialize());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("initializer 'w'"), std::string::npos) << s.status().message();
}

TEST(ModelLoaderTest, RefusesAbsurdRawDataShapesWithoutAllocating) {
  ModelBuilder b;
  b.Input("x", {2}).Output("y");
  auto* t = b.graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(int64_t{1} << 40);
  t->add_dims(int64_t{1} << 40);  // overflows int64 elements
  t->set_raw_data(std::string(8, '\0'));
  b.Node("Add", {"x", "w"}, {"y"});
  auto s = LoadBytes(b.Serialize());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelLoaderTest, RefusesNegativeDims) {
  ModelBuilder b;
  b.Input("x", {2}).Output("y").Initializer("w", {-2}, {1.f, 2.f});
  b.Node("Add", {"x", "w"}, {"y"});
  EXPECT_FALSE(LoadBytes(b.Serialize()).ok());
}

TEST(ModelLoaderTest, RefusesAttributesOfTheWrongType) {
  ModelBuilder b;
  b.Input("x", {1, 4}).Output("y");
  auto* n = b.Node("Softmax", {"x"}, {"y"}, "sm");
  auto* a = n->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("last");
  auto s = LoadBytes(b.Serialize());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("axis"), std::string::npos) << s.status().message();
}

TEST(ModelLoaderTest, RefusesUnsupportedOpsets) {
  ModelBuilder b(99);
  b.Input("x", {2}).Output("y");
  b.Node("Relu", {"x"}, {"y"});
  auto s = LoadBytes(b.Serialize());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
}

TEST(ModelLoaderTest, MissingFileIsNotFound) {
  auto s = Session::Load("/nonexistent/model.onnx", SessionOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
}

class ExternalDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mf_extdata_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "model");
    std::ofstream(dir_ / "model" / "weights.bin", std::ios::binary).write("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
    std::ofstream(dir_ / "secret.bin", std::ios::binary).write("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string ModelWithExternal(const std::string& location, const std::string& length = "8") {
    ModelBuilder b;
    b.Input("x", {2}).Output("y");
    auto* t = b.graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(2);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t->add_external_data();
    e->set_key("location");
    e->set_value(location);
    auto* l = t->add_external_data();
    l->set_key("length");
    l->set_value(length);
    b.Node("Add", {"x", "w"}, {"y"});
    return b.Serialize();
  }

  std::filesystem::path dir_;
};

TEST_F(ExternalDataTest, ReadsDataInsideTheModelDirectory) {
  auto s = LoadBytes(ModelWithExternal("weights.bin"), (dir_ / "model").string());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_GE((*s)->memory_bytes(), 8u);
}

TEST_F(ExternalDataTest, RefusesPathsEscapingTheModelDirectory) {
  for (const std::string loc : {"../secret.bin", "/etc/passwd", "sub/../../secret.bin"}) {
    auto s = LoadBytes(ModelWithExternal(loc), (dir_ / "model").string());
    ASSERT_FALSE(s.ok()) << loc;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status().ToString();
  }
  std::filesystem::create_symlink(dir_ / "secret.bin", dir_ / "model" / "link.bin");
  auto s = LoadBytes(ModelWithExternal("link.bin"), (dir_ / "model").string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("outside"), std::string::npos) << s.status().message();
}

TEST_F(ExternalDataTest, RefusesLengthsBeyondTheFile) {
  auto s = LoadBytes(ModelWithExternal("weights.bin", "4096"), (dir_ / "model").string());
  ASSERT_FALSE(s.ok());
}

TEST_F(ExternalDataTest, RefusesExternalDataForModelsLoadedFromBytes) {
  EXPECT_FALSE(LoadBytes(ModelWithExternal("weights.bin"), "").ok());
}

}  // namespace
}  // namespace mf::runtime
