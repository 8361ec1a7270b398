#include "server/codec/tensor_proto.h"

#include <gtest/gtest.h>

#include "codec_test_util.h"

namespace mf::codec {
namespace {

using runtime::DataType;
using testing::MakeStrings;
using testing::MakeTensor;
using testing::Values;

tensorflow::TensorProto Proto(tensorflow::DataType dtype, std::vector<int64_t> dims) {
  tensorflow::TensorProto p;
  p.set_dtype(dtype);
  for (int64_t d : dims) p.mutable_tensor_shape()->add_dim()->set_size(d);
  return p;
}

std::string DecodeError(const tensorflow::TensorProto& p) {
  auto t = TensorFromProto(p);
  EXPECT_FALSE(t.ok());
  if (t.ok()) return "";
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  return t.status().message();
}

TEST(TensorProtoDataType, MapsEveryRuntimeTypeBothWays) {
  for (DataType d : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64, DataType::kInt8,
                     DataType::kInt16, DataType::kInt32, DataType::kInt64, DataType::kUInt8, DataType::kUInt16,
                     DataType::kUInt32, DataType::kUInt64, DataType::kBool, DataType::kString}) {
    auto back = FromTfDataType(ToTfDataType(d));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, d);
  }
  EXPECT_EQ(ToTfDataType(DataType::kFloat32), 1);
  EXPECT_EQ(ToTfDataType(DataType::kFloat16), 19);
  EXPECT_EQ(ToTfDataType(DataType::kBFloat16), 14);
  EXPECT_EQ(ToTfDataType(DataType::kUInt64), 23);
  auto complex = FromTfDataType(tensorflow::DT_COMPLEX64);
  ASSERT_FALSE(complex.ok());
  EXPECT_NE(complex.status().message().find("DT_COMPLEX64 is not supported"), std::string::npos);
}

TEST(TensorProtoDecode, TensorContent) {
  auto p = Proto(tensorflow::DT_FLOAT, {2, 2});
  std::vector<float> v = {1, 2, 3, 4};
  p.set_tensor_content(std::string(reinterpret_cast<const char*>(v.data()), 16));
  auto t = TensorFromProto(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->shape(), (runtime::Shape{2, 2}));
  EXPECT_EQ(Values<float>(*t), v);
  p.mutable_tensor_content()->pop_back();
  EXPECT_EQ(DecodeError(p), "tensor_content holds 15 bytes but shape [2, 2] of DT_FLOAT needs 16");
  p.set_tensor_content(std::string(16, '\0'));
  p.add_float_val(1);
  EXPECT_EQ(DecodeError(p), "DT_FLOAT tensor carries values in float_val as well as in tensor_content");
}

TEST(TensorProtoDecode, TypedFieldsAndBroadcast) {
  auto f = Proto(tensorflow::DT_FLOAT, {3});
  f.add_float_val(0.5f);
  EXPECT_EQ(Values<float>(*TensorFromProto(f)), (std::vector<float>{0.5f, 0.5f, 0.5f}));
  f.add_float_val(1.5f);
  EXPECT_EQ(DecodeError(f),
            "DT_FLOAT tensor of shape [3] (3 elements) has 2 values in float_val; expected 3 or a single value to "
            "broadcast");

  auto i8 = Proto(tensorflow::DT_INT8, {2});
  i8.add_int_val(-128);
  i8.add_int_val(127);
  EXPECT_EQ(Values<int8_t>(*TensorFromProto(i8)), (std::vector<int8_t>{-128, 127}));
  i8.set_int_val(1, 128);
  EXPECT_EQ(DecodeError(i8), "value 128 at index 1 is out of range for DT_INT8");

  auto u8 = Proto(tensorflow::DT_UINT8, {2});
  u8.add_int_val(255);
  u8.add_int_val(0);
  EXPECT_EQ(Values<uint8_t>(*TensorFromProto(u8)), (std::vector<uint8_t>{255, 0}));

  auto half = Proto(tensorflow::DT_HALF, {2});
  half.add_half_val(0x3C00);
  half.add_half_val(0xC000);
  EXPECT_EQ(Values<uint16_t>(*TensorFromProto(half)), (std::vector<uint16_t>{0x3C00, 0xC000}));
  half.set_half_val(0, 70000);
  EXPECT_NE(DecodeError(half).find("out of range for DT_HALF"), std::string::npos);

  auto i64 = Proto(tensorflow::DT_INT64, {});
  i64.add_int64_val(-5);
  auto scalar = TensorFromProto(i64);
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->rank(), 0);
  EXPECT_EQ(Values<int64_t>(*scalar), (std::vector<int64_t>{-5}));

  auto b = Proto(tensorflow::DT_BOOL, {2});
  b.add_bool_val(true);
  b.add_bool_val(false);
  EXPECT_EQ(Values<uint8_t>(*TensorFromProto(b)), (std::vector<uint8_t>{1, 0}));

  auto u64 = Proto(tensorflow::DT_UINT64, {1});
  u64.add_uint64_val(~0ull);
  EXPECT_EQ(Values<uint64_t>(*TensorFromProto(u64)), (std::vector<uint64_t>{~0ull}));

  auto s = Proto(tensorflow::DT_STRING, {2, 2});
  s.add_string_val(std::string("a\0b", 3));
  auto strings = TensorFromProto(s);
  ASSERT_TRUE(strings.ok());
  EXPECT_EQ(strings->strings(), std::vector<std::string>(4, std::string("a\0b", 3)));

  auto empty = Proto(tensorflow::DT_FLOAT, {0, 3});
  auto none = TensorFromProto(empty);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->num_elements(), 0);
}

TEST(TensorProtoDecode, RefusesMalformedProtos) {
  auto wrong = Proto(tensorflow::DT_FLOAT, {1});
  wrong.add_double_val(1.0);
  EXPECT_EQ(DecodeError(wrong), "DT_FLOAT tensor carries values in double_val; expected float_val");

  auto missing = Proto(tensorflow::DT_INT32, {2});
  EXPECT_NE(DecodeError(missing).find("has 0 values in int_val"), std::string::npos);

  auto negative = Proto(tensorflow::DT_FLOAT, {-1});
  EXPECT_EQ(DecodeError(negative), "tensor_shape has negative dimension -1");

  auto unknown = Proto(tensorflow::DT_FLOAT, {});
  unknown.mutable_tensor_shape()->set_unknown_rank(true);
  EXPECT_NE(DecodeError(unknown).find("unknown_rank"), std::string::npos);

  // A huge broadcast is refused before anything is allocated.
  auto huge = Proto(tensorflow::DT_FLOAT, {1 << 20, 1 << 20});
  huge.add_float_val(1);
  EXPECT_NE(DecodeError(huge).find("too large"), std::string::npos);
  auto overflow = Proto(tensorflow::DT_FLOAT, {1ll << 40, 1ll << 40});
  EXPECT_NE(DecodeError(overflow).find("too large"), std::string::npos);
  auto strings = Proto(tensorflow::DT_STRING, {1 << 20});
  strings.add_string_val(std::string(64, 'x'));
  EXPECT_NE(DecodeError(strings).find("more than 16 MiB"), std::string::npos);
  // Within the tensor limit but above the broadcast limit: a tiny message may not expand to 1 GiB.
  auto amplified = Proto(tensorflow::DT_FLOAT, {1 << 28});
  amplified.add_float_val(1);
  EXPECT_EQ(DecodeError(amplified),
            "broadcasting one value to shape [268435456] would take more than 16 MiB; send the values or "
            "tensor_content instead");

  auto content_string = Proto(tensorflow::DT_STRING, {1});
  content_string.set_tensor_content("abcd");
  EXPECT_NE(DecodeError(content_string).find("must use string_val"), std::string::npos);

  auto resource = Proto(tensorflow::DT_RESOURCE, {1});
  EXPECT_NE(DecodeError(resource).find("DT_RESOURCE is not supported"), std::string::npos);

  auto deep = Proto(tensorflow::DT_FLOAT, std::vector<int64_t>(40, 1));
  EXPECT_NE(DecodeError(deep).find("rank 40"), std::string::npos);
}

TEST(TensorProtoEncode, RoundTripsInBothEncodings) {
  std::vector<runtime::Tensor> tensors;
  tensors.push_back(MakeTensor<float>(DataType::kFloat32, {2, 2}, {1, -2, 3.5f, 4}));
  tensors.push_back(MakeTensor<double>(DataType::kFloat64, {1}, {0.25}));
  tensors.push_back(MakeTensor<uint16_t>(DataType::kFloat16, {2}, {0x3C00, 0x7E00}));
  tensors.push_back(MakeTensor<uint16_t>(DataType::kBFloat16, {1}, {0x3F80}));
  tensors.push_back(MakeTensor<int8_t>(DataType::kInt8, {3}, {-1, 0, 1}));
  tensors.push_back(MakeTensor<int16_t>(DataType::kInt16, {1}, {-300}));
  tensors.push_back(MakeTensor<int32_t>(DataType::kInt32, {2}, {1 << 30, -7}));
  tensors.push_back(MakeTensor<int64_t>(DataType::kInt64, {1}, {1ll << 40}));
  tensors.push_back(MakeTensor<uint8_t>(DataType::kUInt8, {2}, {0, 255}));
  tensors.push_back(MakeTensor<uint16_t>(DataType::kUInt16, {1}, {65535}));
  tensors.push_back(MakeTensor<uint32_t>(DataType::kUInt32, {1}, {4000000000u}));
  tensors.push_back(MakeTensor<uint64_t>(DataType::kUInt64, {1}, {~0ull}));
  tensors.push_back(MakeTensor<uint8_t>(DataType::kBool, {2}, {1, 0}));
  tensors.push_back(MakeStrings({2}, {"x", std::string("\0\xff", 2)}));
  for (auto encoding : {TensorProtoEncoding::kTensorContent, TensorProtoEncoding::kTypedValues}) {
    for (const auto& t : tensors) {
      tensorflow::TensorProto p;
      TensorToProto(t, encoding, &p);
      EXPECT_EQ(p.tensor_content().empty(),
                encoding == TensorProtoEncoding::kTypedValues || t.dtype() == DataType::kString);
      auto back = TensorFromProto(p);
      ASSERT_TRUE(back.ok()) << back.status().ToString() << " for " << runtime::DataTypeName(t.dtype());
      EXPECT_EQ(back->dtype(), t.dtype());
      EXPECT_EQ(back->shape(), t.shape());
      EXPECT_EQ(back->bytes(), t.bytes());
      EXPECT_EQ(back->strings(), t.strings());
    }
  }
}

TEST(TensorProtoEncode, SignatureAndStatus) {
  ModelSignature sig = testing::Signature({testing::Info("x", DataType::kFloat32, {-1, 784})},
                                          {testing::Info("probs", DataType::kFloat32, {-1, 10})});
  tensorflow::SignatureDef def;
  SignatureToProto(sig, &def);
  EXPECT_EQ(def.method_name(), "tensorflow/serving/predict");
  ASSERT_EQ(def.inputs().count("x"), 1u);
  EXPECT_EQ(def.inputs().at("x").dtype(), tensorflow::DT_FLOAT);
  EXPECT_EQ(def.inputs().at("x").tensor_shape().dim(0).size(), -1);
  EXPECT_EQ(def.inputs().at("x").tensor_shape().dim(1).size(), 784);
  EXPECT_EQ(def.outputs().at("probs").name(), "probs");

  tensorflow::serving::ModelVersionStatus proto;
  VersionStatusToProto({7, ModelVersionState::kEnd, NotFound("no model.onnx")}, &proto);
  EXPECT_EQ(proto.version(), 7);
  EXPECT_EQ(proto.state(), tensorflow::serving::ModelVersionStatus::END);
  EXPECT_EQ(proto.status().error_code(), tensorflow::error::NOT_FOUND);
  EXPECT_EQ(proto.status().error_message(), "no model.onnx");
}

}  // namespace
}  // namespace mf::codec
