#include "server/codec/kserve_proto.h"

#include <gtest/gtest.h>

#include "codec_test_util.h"

namespace mf::codec {
namespace {

using runtime::DataType;
using testing::MakeStrings;
using testing::MakeTensor;
using testing::Values;

inference::ModelInferRequest::InferInputTensor* AddInput(inference::ModelInferRequest* r, std::string name,
                                                         std::string datatype, std::vector<int64_t> shape) {
  auto* input = r->add_inputs();
  input->set_name(std::move(name));
  input->set_datatype(std::move(datatype));
  for (int64_t d : shape) input->add_shape(d);
  return input;
}

std::string Error(const inference::ModelInferRequest& r) {
  auto inputs = InputsFromModelInferRequest(r);
  EXPECT_FALSE(inputs.ok());
  return inputs.ok() ? "" : inputs.status().message();
}

TEST(KServeProto, TypedContents) {
  inference::ModelInferRequest r;
  auto* x = AddInput(&r, "x", "FP32", {2});
  x->mutable_contents()->add_fp32_contents(1.5f);
  x->mutable_contents()->add_fp32_contents(-2);
  auto* i = AddInput(&r, "i", "INT16", {1});
  i->mutable_contents()->add_int_contents(-300);
  auto* u = AddInput(&r, "u", "UINT8", {1});
  u->mutable_contents()->add_uint_contents(255);
  auto* s = AddInput(&r, "s", "BYTES", {1});
  s->mutable_contents()->add_bytes_contents(std::string("\0\1", 2));
  auto* b = AddInput(&r, "b", "BOOL", {1});
  b->mutable_contents()->add_bool_contents(true);
  auto inputs = InputsFromModelInferRequest(r);
  ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
  ASSERT_EQ(inputs->size(), 5u);
  EXPECT_EQ(Values<float>((*inputs)[0].tensor), (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(Values<int16_t>((*inputs)[1].tensor), (std::vector<int16_t>{-300}));
  EXPECT_EQ(Values<uint8_t>((*inputs)[2].tensor), (std::vector<uint8_t>{255}));
  EXPECT_EQ((*inputs)[3].tensor.strings(), (std::vector<std::string>{std::string("\0\1", 2)}));
  EXPECT_EQ(Values<uint8_t>((*inputs)[4].tensor), (std::vector<uint8_t>{1}));

  u->mutable_contents()->set_uint_contents(0, 256);
  EXPECT_NE(Error(r).find("out of range for UINT8"), std::string::npos);
}

TEST(KServeProto, RawContents) {
  inference::ModelInferRequest r;
  AddInput(&r, "x", "FP16", {2});
  AddInput(&r, "s", "BYTES", {1});
  r.add_raw_input_contents(std::string("\x00\x3c\x00\xc0", 4));
  r.add_raw_input_contents(std::string("\x02\0\0\0hi", 6));
  auto inputs = InputsFromModelInferRequest(r);
  ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
  EXPECT_EQ(Values<uint16_t>((*inputs)[0].tensor), (std::vector<uint16_t>{0x3C00, 0xC000}));
  EXPECT_EQ((*inputs)[1].tensor.strings(), (std::vector<std::string>{"hi"}));

  r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  EXPECT_NE(Error(r).find("although the request uses raw_input_contents"), std::string::npos);
  r.mutable_inputs(0)->clear_contents();
  r.add_raw_input_contents("");
  EXPECT_NE(Error(r).find("must have one per input"), std::string::npos);
}

TEST(KServeProto, RefusesBadInputs) {
  inference::ModelInferRequest none;
  EXPECT_EQ(Error(none), "the inference request has no inputs");

  inference::ModelInferRequest r;
  auto* x = AddInput(&r, "x", "FP32", {3});
  x->mutable_contents()->add_fp32_contents(1);
  EXPECT_EQ(Error(r), "input 'x': 1 values in fp32_contents but shape [3] needs 3");
  x->mutable_contents()->clear_fp32_contents();
  x->mutable_contents()->add_int_contents(1);
  EXPECT_NE(Error(r).find("must be in fp32_contents, not int_contents"), std::string::npos);
  x->set_datatype("FP16");
  EXPECT_NE(Error(r).find("send it in raw_input_contents"), std::string::npos);
  x->set_datatype("COMPLEX");
  EXPECT_NE(Error(r).find("unknown datatype"), std::string::npos);
  x->set_datatype("FP32");
  x->set_shape(0, -3);
  EXPECT_NE(Error(r).find("negative dimension"), std::string::npos);
  x->set_shape(0, 1ll << 62);
  EXPECT_NE(Error(r).find("too large"), std::string::npos);
}

TEST(KServeProto, OutputsRawOrTyped) {
  auto y = MakeTensor<float>(DataType::kFloat32, {2}, {1, 2});
  auto s = MakeStrings({1}, {"z"});
  std::vector<NamedTensorView> outputs = {{"y", &y}, {"s", &s}};
  inference::ModelInferResponse typed;
  AddOutputsToModelInferResponse(outputs, V2OutputEncoding::kContents, &typed);
  ASSERT_EQ(typed.outputs_size(), 2);
  EXPECT_EQ(typed.raw_output_contents_size(), 0);
  EXPECT_EQ(typed.outputs(0).datatype(), "FP32");
  EXPECT_EQ(typed.outputs(0).contents().fp32_contents_size(), 2);
  EXPECT_EQ(typed.outputs(1).contents().bytes_contents(0), "z");

  inference::ModelInferResponse raw;
  AddOutputsToModelInferResponse(outputs, V2OutputEncoding::kRaw, &raw);
  ASSERT_EQ(raw.raw_output_contents_size(), 2);
  EXPECT_EQ(raw.raw_output_contents(0).size(), 8u);
  EXPECT_EQ(raw.raw_output_contents(1), std::string("\1\0\0\0z", 5));

  // FP16 has no typed field: the whole response goes raw.
  auto h = MakeTensor<uint16_t>(DataType::kFloat16, {1}, {0x3C00});
  std::vector<NamedTensorView> with_half = {{"y", &y}, {"h", &h}};
  inference::ModelInferResponse forced;
  AddOutputsToModelInferResponse(with_half, V2OutputEncoding::kContents, &forced);
  EXPECT_EQ(forced.raw_output_contents_size(), 2);
  EXPECT_EQ(forced.outputs(0).contents().fp32_contents_size(), 0);
}

TEST(KServeProto, Metadata) {
  ModelSignature sig = testing::Signature({testing::Info("x", DataType::kFloat32, {-1, 4})},
                                          {testing::Info("y", DataType::kBool, {-1})});
  inference::ModelMetadataResponse meta;
  SignatureToV2Metadata(sig, &meta);
  ASSERT_EQ(meta.inputs_size(), 1);
  EXPECT_EQ(meta.inputs(0).datatype(), "FP32");
  EXPECT_EQ(meta.inputs(0).shape(0), -1);
  EXPECT_EQ(meta.outputs(0).datatype(), "BOOL");
}

}  // namespace
}  // namespace mf::codec
