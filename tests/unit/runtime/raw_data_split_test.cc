// SplitRawData (runtime/graph/raw_data_split.h) and the loader path built on it: large raw_data
// is split out exactly as protobuf would read it, anything unusual falls back to a whole parse,
// and a model loaded from a file with its weights read in place equals the same model parsed
// whole.
#include "runtime/graph/raw_data_split.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/graph/model_loader.h"
#include "tests/unit/runtime/raw_data_split_check.h"

namespace mf::runtime {
namespace {

using testing::CheckSplit;
using testing::ReadFrom;

constexpr uint64_t kMin = 1024;

std::string Floats(size_t n, float seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = seed + static_cast<float>(i % 97) * 0.25f;
  return std::string(reinterpret_cast<const char*>(v.data()), n * sizeof(float));
}

// A Gemm y = x * W + b with W of `rows` x 4 in raw_data, b (4 floats) in raw_data too.
onnx::ModelProto GemmModel(int64_t rows) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(rows);
  w->add_dims(4);
  w->set_raw_data(Floats(static_cast<size_t>(rows) * 4, 1.0f));
  auto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(4);
  b->set_raw_data(Floats(4, 2.0f));
  auto* n = g->add_node();
  n->set_op_type("Gemm");
  n->add_input("x");
  n->add_input("W");
  n->add_input("b");
  n->add_output("y");
  auto declare = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  };
  declare(g->add_input(), "x", {1, rows});
  declare(g->add_output(), "y", {1, 4});
  return m;
}

std::optional<SplitModel> Split(const std::string& bytes, uint64_t cap = 1 << 20) {
  return SplitRawData(bytes.size(), ReadFrom(bytes), kMin, cap);
}

TEST(RawDataSplitTest, SplitsLargeRawDataAndKeepsSmallOnes) {
  const std::string bytes = GemmModel(512).SerializeAsString();
  auto split = Split(bytes);
  ASSERT_TRUE(split.has_value());
  ASSERT_EQ(split->raw_data.size(), 1u);
  ASSERT_TRUE(split->raw_data.count(0));  // W, not b (16 bytes)
  EXPECT_EQ(split->raw_data.at(0).length, 512u * 4 * sizeof(float));
  EXPECT_LT(split->structure.size(), 1024u);
  EXPECT_EQ(CheckSplit(bytes, *split), "");
}

TEST(RawDataSplitTest, NothingToSplitMeansParseWhole) {
  EXPECT_FALSE(Split(GemmModel(8).SerializeAsString()).has_value());
}

// A length-delimited field as protobuf writes it: tag, varint length, payload.
std::string Field(uint32_t field, const std::string& payload) {
  std::string out;
  for (uint64_t v : {(uint64_t{field} << 3) | 2, uint64_t{payload.size()}}) {
    while (v >= 0x80) {
      out.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
  }
  return out + payload;
}

TEST(RawDataSplitTest, TheLastRawDataWinsAsInProtobuf) {
  onnx::TensorProto head;
  head.set_name("W");
  head.set_data_type(onnx::TensorProto::FLOAT);
  head.add_dims(512);
  const std::string big = Floats(512, 1.0f);  // 2 KiB: split
  for (bool big_last : {false, true}) {
    const std::string tensor =
        head.SerializeAsString() + (big_last ? Field(9, "abcd") + Field(9, big) : Field(9, big) + Field(9, "abcd"));
    const std::string bytes = Field(7, Field(5, tensor));
    auto split = Split(bytes);
    if (big_last) {
      ASSERT_TRUE(split.has_value());
      EXPECT_EQ(split->raw_data.size(), 1u);
      EXPECT_EQ(CheckSplit(bytes, *split), "");
    } else {
      EXPECT_FALSE(split.has_value());  // "abcd" wins: nothing left to read in place
    }
  }
}

TEST(RawDataSplitTest, ATensorThatAlsoNamesExternalDataIsNotSplit) {
  onnx::ModelProto m = GemmModel(512);
  auto* entry = m.mutable_graph()->mutable_initializer(0)->add_external_data();
  entry->set_key("location");
  entry->set_value("w.bin");
  EXPECT_FALSE(Split(m.SerializeAsString()).has_value());
  m.mutable_graph()->mutable_initializer(0)->clear_external_data();
  m.mutable_graph()->mutable_initializer(0)->set_data_location(onnx::TensorProto::EXTERNAL);
  EXPECT_FALSE(Split(m.SerializeAsString()).has_value());
}

TEST(RawDataSplitTest, TwoGraphFieldsMergeAndCountInitializersOnward) {
  onnx::ModelProto first = GemmModel(512);
  onnx::ModelProto second;
  auto* extra = second.mutable_graph()->add_initializer();
  extra->set_name("V");
  extra->set_data_type(onnx::TensorProto::FLOAT);
  extra->add_dims(1024);
  extra->set_raw_data(Floats(1024, 3.0f));
  const std::string bytes = first.SerializeAsString() + second.SerializeAsString();  // protobuf merges
  auto split = Split(bytes);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->raw_data.size(), 2u);
  EXPECT_TRUE(split->raw_data.count(2));  // W, b, then V
  EXPECT_EQ(CheckSplit(bytes, *split), "");
}

TEST(RawDataSplitTest, MalformedOrUnusualInputFallsBackToAWholeParse) {
  const std::string bytes = GemmModel(512).SerializeAsString();
  for (size_t cut : {size_t{1}, size_t{7}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_FALSE(Split(bytes.substr(0, cut)).has_value()) << "cut at " << cut;
  }
  EXPECT_FALSE(Split(bytes + "\x0b").has_value());  // a group start (wire type 3)
  EXPECT_FALSE(Split(bytes + "\x0f").has_value());  // wire type 7
  EXPECT_FALSE(
      Split(bytes + std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11)).has_value());  // varint > 64 bits
  EXPECT_FALSE(Split(bytes, /*cap=*/16).has_value());  // structure larger than allowed
}

TEST(RawDataSplitTest, AFileLoadReadsTheWeightsInPlaceAndEqualsAWholeParse) {
  const onnx::ModelProto m = GemmModel(4096);  // a 64 KiB weight: at the loader's threshold
  const std::string bytes = m.SerializeAsString();
  ASSERT_TRUE(SplitRawData(bytes.size(), ReadFrom(bytes), 64 << 10, 1 << 20).has_value());
  const auto dir = std::filesystem::temp_directory_path() / ("mf_split_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "model.onnx";
  std::ofstream(path, std::ios::binary) << bytes;

  auto from_file = LoadModelFile(path.string());
  auto from_bytes = LoadModelBytes(bytes, dir.string());
  ASSERT_TRUE(from_file.ok()) << from_file.status().message();
  ASSERT_TRUE(from_bytes.ok()) << from_bytes.status().message();
  ASSERT_EQ(from_file->values.size(), from_bytes->values.size());
  int constants = 0;
  for (size_t i = 0; i < from_file->values.size(); ++i) {
    const auto& a = from_file->values[i].constant;
    const auto& b = from_bytes->values[i].constant;
    ASSERT_EQ(a == nullptr, b == nullptr);
    if (!a) continue;
    ++constants;
    ASSERT_EQ(a->shape(), b->shape());
    ASSERT_EQ(a->byte_size(), b->byte_size());
    EXPECT_EQ(std::memcmp(a->raw_data(), b->raw_data(), a->byte_size()), 0);
  }
  EXPECT_EQ(constants, 2);

  // A truncated file (a storage glitch): a clear error, no crash.
  std::filesystem::resize_file(path, bytes.size() - 100);
  auto truncated = LoadModelFile(path.string());
  EXPECT_FALSE(truncated.ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mf::runtime
