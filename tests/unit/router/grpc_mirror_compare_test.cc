// GrpcResponsesAgree over answers built with the real generated messages: the same prediction in
// each of the encodings TF Serving and KServe v2 allow agrees, any real difference does not, and
// broken bytes never pass for a prediction.
#include "server/router/grpc_mirror_compare.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "inference/grpc_predict_v2.pb.h"
#include "tensorflow_serving/apis/predict.pb.h"

namespace mf::router {
namespace {

constexpr const char* kPredict = "/tensorflow.serving.PredictionService/Predict";
constexpr const char* kModelInfer = "/inference.GRPCInferenceService/ModelInfer";

// A response body as it arrives: one uncompressed length-prefixed message.
std::string Frame(const google::protobuf::MessageLite& message) {
  const std::string bytes = message.SerializeAsString();
  std::string body(5, '\0');
  const auto n = static_cast<uint32_t>(bytes.size());
  body[1] = static_cast<char>(n >> 24);
  body[2] = static_cast<char>(n >> 16);
  body[3] = static_cast<char>(n >> 8);
  body[4] = static_cast<char>(n);
  return body + bytes;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// A Predict answer with output "scores" of `values` (shape [1, n]) as float_val, or as
// tensor_content when `packed`.
std::string Predict(std::vector<float> values, bool packed = false, int64_t version = 1,
                    const std::function<void(tensorflow::TensorProto*)>& edit = {}) {
  tensorflow::serving::PredictResponse response;
  response.mutable_model_spec()->set_name("digits");
  response.mutable_model_spec()->mutable_version()->set_value(version);
  tensorflow::TensorProto& t = (*response.mutable_outputs())["scores"];
  t.set_dtype(tensorflow::DT_FLOAT);
  t.mutable_tensor_shape()->add_dim()->set_size(1);
  t.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(values.size()));
  if (packed) {
    t.set_tensor_content(Bytes(values));
  } else {
    for (float v : values) t.add_float_val(v);
  }
  if (edit) edit(&t);
  return Frame(response);
}

// A ModelInfer answer with output "scores" (FP32, shape [1, n]) in contents, or in
// raw_output_contents when `raw`.
std::string Infer(std::vector<float> values, bool raw = false, const std::string& version = "1",
                  const std::function<void(inference::ModelInferResponse*)>& edit = {}) {
  inference::ModelInferResponse response;
  response.set_model_name("digits");
  response.set_model_version(version);
  response.set_id("request-" + version);
  auto* out = response.add_outputs();
  out->set_name("scores");
  out->set_datatype("FP32");
  out->add_shape(1);
  out->add_shape(static_cast<int64_t>(values.size()));
  if (raw) {
    response.add_raw_output_contents(Bytes(values));
  } else {
    for (float v : values) out->mutable_contents()->add_fp32_contents(v);
  }
  if (edit) edit(&response);
  return Frame(response);
}

struct Case {
  const char* name;
  const char* path;
  int primary_code;
  std::string primary;
  int mirror_code;
  std::string mirror;
  bool agree;
};

TEST(GrpcMirrorCompareTest, Table) {
  const std::vector<float> p{0.1f, 0.7f, 0.2f};
  const std::string truncated = Predict(p).substr(0, 12);
  const std::vector<Case> cases = {
      {"identical Predict", kPredict, 0, Predict(p), 0, Predict(p), true},
      {"float_val vs tensor_content, other version", kPredict, 0, Predict(p), 0, Predict(p, true, 2), true},
      {"within tolerance", kPredict, 0, Predict(p), 0, Predict({0.1f, 0.70000001f, 0.2f}, true), true},
      {"a prediction differs", kPredict, 0, Predict(p), 0, Predict({0.1f, 0.6f, 0.3f}), false},
      {"one value fewer", kPredict, 0, Predict(p), 0, Predict({0.1f, 0.7f}), false},
      {"other shape", kPredict, 0, Predict(p), 0,
       Predict(p, false, 1, [](tensorflow::TensorProto* t) { t->mutable_tensor_shape()->mutable_dim(0)->set_size(3); }),
       false},
      {"other dtype", kPredict, 0, Predict(p), 0,
       Predict(p, false, 1, [](tensorflow::TensorProto* t) { t->set_dtype(tensorflow::DT_DOUBLE); }), false},
      {"int_val negative vs int32 content", kPredict, 0,
       Predict({}, false, 1,
               [](tensorflow::TensorProto* t) {
                 t->set_dtype(tensorflow::DT_INT32);
                 t->mutable_tensor_shape()->mutable_dim(1)->set_size(2);
                 t->add_int_val(-3);
                 t->add_int_val(9);
               }),
       0,
       Predict({}, false, 2,
               [](tensorflow::TensorProto* t) {
                 t->set_dtype(tensorflow::DT_INT32);
                 t->mutable_tensor_shape()->mutable_dim(1)->set_size(2);
                 t->set_tensor_content(Bytes(std::vector<int32_t>{-3, 9}));
               }),
       true},
      {"half_val vs half content", kPredict, 0,
       Predict({}, false, 1,
               [](tensorflow::TensorProto* t) {
                 t->set_dtype(tensorflow::DT_HALF);
                 t->mutable_tensor_shape()->mutable_dim(1)->set_size(1);
                 t->add_half_val(0x3C00);  // 1.0
               }),
       0,
       Predict({}, false, 1,
               [](tensorflow::TensorProto* t) {
                 t->set_dtype(tensorflow::DT_HALF);
                 t->mutable_tensor_shape()->mutable_dim(1)->set_size(1);
                 t->set_tensor_content(Bytes(std::vector<uint16_t>{0x3C00}));
               }),
       true},
      {"strings equal", kPredict, 0,
       Predict({}, false, 1, [](tensorflow::TensorProto* t) { t->add_string_val("seven"); }), 0,
       Predict({}, false, 2, [](tensorflow::TensorProto* t) { t->add_string_val("seven"); }), true},
      {"strings differ", kPredict, 0,
       Predict({}, false, 1, [](tensorflow::TensorProto* t) { t->add_string_val("seven"); }), 0,
       Predict({}, false, 1, [](tensorflow::TensorProto* t) { t->add_string_val("one"); }), false},
      {"status differs", kPredict, 0, Predict(p), 3, "", false},
      {"the same error", kPredict, 5, "", 5, "", true},
      {"truncated mirror", kPredict, 0, Predict(p), 0, truncated, false},
      {"garbage message in a good frame", kPredict, 0, Predict(p), 0, std::string("\0\0\0\0\3\xff\xff\xff", 8), false},
      {"identical garbage", kPredict, 0, truncated, 0, truncated, true},
      {"two messages", kPredict, 0, Predict(p), 0, Predict(p) + Predict(p), false},
      {"ModelInfer contents vs raw, other version", kModelInfer, 0, Infer(p), 0, Infer(p, true, "2"), true},
      {"ModelInfer value differs", kModelInfer, 0, Infer(p), 0, Infer({0.5f, 0.3f, 0.2f}, true), false},
      {"ModelInfer extra output", kModelInfer, 0, Infer(p), 0,
       Infer(p, false, "1",
             [](inference::ModelInferResponse* r) {
               auto* o = r->add_outputs();
               o->set_name("labels");
               o->set_datatype("INT64");
               o->add_shape(1);
               o->mutable_contents()->add_int64_contents(1);
             }),
       false},
      {"ModelInfer BYTES contents vs raw", kModelInfer, 0,
       Infer({}, false, "1",
             [](inference::ModelInferResponse* r) {
               r->mutable_outputs(0)->set_datatype("BYTES");
               r->mutable_outputs(0)->mutable_contents()->add_bytes_contents("seven");
             }),
       0,
       Infer({}, false, "2",
             [](inference::ModelInferResponse* r) {
               r->mutable_outputs(0)->set_datatype("BYTES");
               r->add_raw_output_contents(std::string("\5\0\0\0seven", 9));
             }),
       true},
      {"ModelInfer more raw contents than outputs", kModelInfer, 0, Infer(p, true), 0,
       Infer(p, true, "1", [](inference::ModelInferResponse* r) { r->add_raw_output_contents("xx"); }), false},
      {"other methods compare bytes", "/tensorflow.serving.PredictionService/GetModelMetadata", 0, Predict(p), 0,
       Predict(p, false, 2), false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(GrpcResponsesAgree(c.path, c.primary_code, c.primary, c.mirror_code, c.mirror), c.agree) << c.name;
    EXPECT_EQ(GrpcResponsesAgree(c.path, c.mirror_code, c.mirror, c.primary_code, c.primary), c.agree)
        << c.name << " (swapped)";
  }
}

}  // namespace
}  // namespace mf::router
