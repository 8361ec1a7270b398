// Builds small ONNX models in memory for the runtime tests (valid ones, and deliberately broken
// ones for the loader's refusal paths).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/runtime/random_values.h"

namespace mf::runtime::testing {

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17) {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
  }

  // A float32 graph input; -1 dims become symbolic ("batch").
  ModelBuilder& Input(const std::string& name, const std::vector<int64_t>& dims, int elem = onnx::TensorProto::FLOAT) {
    Declare(graph()->add_input(), name, dims, elem);
    return *this;
  }
  ModelBuilder& Output(const std::string& name, const std::vector<int64_t>& dims = {},
                       int elem = onnx::TensorProto::FLOAT) {
    Declare(graph()->add_output(), name, dims, elem);
    return *this;
  }
  ModelBuilder& Initializer(const std::string& name, const std::vector<int64_t>& dims,
                            const std::vector<float>& values) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return *this;
  }
  ModelBuilder& Int64Initializer(const std::string& name, const std::vector<int64_t>& dims,
                                 const std::vector<int64_t>& values) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }
  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  static void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  onnx::GraphProto* graph() { return model_.mutable_graph(); }
  onnx::ModelProto& model() { return model_; }
  std::string Serialize() const { return model_.SerializeAsString(); }

 private:
  static void Declare(onnx::ValueInfoProto* v, const std::string& name, const std::vector<int64_t>& dims, int elem) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param("batch");
      else
        dim->set_dim_value(d);
    }
  }
  onnx::ModelProto model_;
};

}  // namespace mf::runtime::testing
