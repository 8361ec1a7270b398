#include "server/codec/kserve_proto.h"

#include <limits>
#include <string>
#include <utility>

#include "server/codec/kserve_raw.h"

namespace mf::codec {
namespace {

using inference::InferTensorContents;
using runtime::DataType;

struct ContentsField {
  const char* name;
  int count;
};

std::vector<ContentsField> ContentsFields(const InferTensorContents& c) {
  return {{"bool_contents", c.bool_contents_size()},     {"int_contents", c.int_contents_size()},
          {"int64_contents", c.int64_contents_size()},   {"uint_contents", c.uint_contents_size()},
          {"uint64_contents", c.uint64_contents_size()}, {"fp32_contents", c.fp32_contents_size()},
          {"fp64_contents", c.fp64_contents_size()},     {"bytes_contents", c.bytes_contents_size()}};
}

const char* ContentsFieldFor(DataType dtype) {
  switch (dtype) {
    case DataType::kBool:
      return "bool_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      return "int_contents";
    case DataType::kInt64:
      return "int64_contents";
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32:
      return "uint_contents";
    case DataType::kUInt64:
      return "uint64_contents";
    case DataType::kFloat32:
      return "fp32_contents";
    case DataType::kFloat64:
      return "fp64_contents";
    case DataType::kString:
      return "bytes_contents";
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return nullptr;
  }
  return nullptr;
}

template <typename Out, typename Field>
Status CopyChecked(const Field& field, runtime::Tensor* tensor, const std::string& what) {
  Out* data = tensor->data<Out>();
  for (int i = 0; i < field.size(); ++i) {
    const auto v = field.Get(i);
    using In = std::decay_t<decltype(v)>;
    if constexpr (!std::is_same_v<In, Out>) {
      if (v < static_cast<In>(std::numeric_limits<Out>::min()) ||
          v > static_cast<In>(std::numeric_limits<Out>::max())) {
        return InvalidArgument(what + ": value " + std::to_string(v) + " at index " + std::to_string(i) +
                               " is out of range for " + std::string(runtime::DataTypeName(tensor->dtype())));
      }
    }
    data[i] = static_cast<Out>(v);
  }
  return Status::Ok();
}

Status FillFromContents(const InferTensorContents& c, runtime::Tensor* t, const std::string& what) {
  switch (t->dtype()) {
    case DataType::kBool: {
      uint8_t* data = t->data<uint8_t>();
      for (int i = 0; i < c.bool_contents_size(); ++i) data[i] = c.bool_contents(i) ? 1 : 0;
      return Status::Ok();
    }
    case DataType::kInt8:
      return CopyChecked<int8_t>(c.int_contents(), t, what);
    case DataType::kInt16:
      return CopyChecked<int16_t>(c.int_contents(), t, what);
    case DataType::kInt32:
      return CopyChecked<int32_t>(c.int_contents(), t, what);
    case DataType::kInt64:
      return CopyChecked<int64_t>(c.int64_contents(), t, what);
    case DataType::kUInt8:
      return CopyChecked<uint8_t>(c.uint_contents(), t, what);
    case DataType::kUInt16:
      return CopyChecked<uint16_t>(c.uint_contents(), t, what);
    case DataType::kUInt32:
      return CopyChecked<uint32_t>(c.uint_contents(), t, what);
    case DataType::kUInt64:
      return CopyChecked<uint64_t>(c.uint64_contents(), t, what);
    case DataType::kFloat32:
      return CopyChecked<float>(c.fp32_contents(), t, what);
    case DataType::kFloat64:
      return CopyChecked<double>(c.fp64_contents(), t, what);
    case DataType::kString: {
      auto& strings = t->strings();
      for (int i = 0; i < c.bytes_contents_size(); ++i) strings[static_cast<size_t>(i)] = c.bytes_contents(i);
      return Status::Ok();
    }
    case DataType::kFloat16:
    case DataType::kBFloat16:
      break;
  }
  return Internal("unhandled datatype");
}

template <typename In, typename Field>
void AddTyped(const runtime::Tensor& t, Field* field) {
  const In* data = t.data<In>();
  field->Reserve(static_cast<int>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) field->Add(data[i]);
}

void FillContents(const runtime::Tensor& t, InferTensorContents* c) {
  switch (t.dtype()) {
    case DataType::kBool: {
      const uint8_t* data = t.data<uint8_t>();
      for (int64_t i = 0; i < t.num_elements(); ++i) c->add_bool_contents(data[i] != 0);
      break;
    }
    case DataType::kInt8:
      AddTyped<int8_t>(t, c->mutable_int_contents());
      break;
    case DataType::kInt16:
      AddTyped<int16_t>(t, c->mutable_int_contents());
      break;
    case DataType::kInt32:
      AddTyped<int32_t>(t, c->mutable_int_contents());
      break;
    case DataType::kInt64:
      AddTyped<int64_t>(t, c->mutable_int64_contents());
      break;
    case DataType::kUInt8:
      AddTyped<uint8_t>(t, c->mutable_uint_contents());
      break;
    case DataType::kUInt16:
      AddTyped<uint16_t>(t, c->mutable_uint_contents());
      break;
    case DataType::kUInt32:
      AddTyped<uint32_t>(t, c->mutable_uint_contents());
      break;
    case DataType::kUInt64:
      AddTyped<uint64_t>(t, c->mutable_uint64_contents());
      break;
    case DataType::kFloat32:
      AddTyped<float>(t, c->mutable_fp32_contents());
      break;
    case DataType::kFloat64:
      AddTyped<double>(t, c->mutable_fp64_contents());
      break;
    case DataType::kString:
      for (const auto& s : t.strings()) c->add_bytes_contents(s);
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      break;  // never typed: see AddOutputsToModelInferResponse
  }
}

StatusOr<NamedTensor> InputFromContents(const inference::ModelInferRequest::InferInputTensor& input, DataType dtype,
                                        runtime::Shape shape, const std::string& what) {
  const char* expected = ContentsFieldFor(dtype);
  if (expected == nullptr) {
    return InvalidArgument(what + ": " + std::string(runtime::DataTypeName(dtype)) +
                           " has no typed contents field; send it in raw_input_contents");
  }
  const int64_t n = runtime::NumElements(shape);
  int count = 0;
  for (const auto& field : ContentsFields(input.contents())) {
    if (field.count == 0) continue;
    if (std::string_view(field.name) != expected) {
      return InvalidArgument(what + ": " + std::string(runtime::DataTypeName(dtype)) + " values must be in " +
                             expected + ", not " + field.name);
    }
    count = field.count;
  }
  if (count != n) {
    return InvalidArgument(what + ": " + std::to_string(count) + " values in " + expected + " but shape " +
                           runtime::ShapeToString(shape) + " needs " + std::to_string(n));
  }
  NamedTensor result{input.name(), {}};
  MF_ASSIGN_OR_RETURN(result.tensor, runtime::Tensor::Allocate(dtype, std::move(shape)));
  MF_RETURN_IF_ERROR(FillFromContents(input.contents(), &result.tensor, what));
  return result;
}

}  // namespace

StatusOr<std::vector<NamedTensor>> InputsFromModelInferRequest(const inference::ModelInferRequest& request) {
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return InvalidArgument("raw_input_contents has " + std::to_string(request.raw_input_contents_size()) +
                           " entries for " + std::to_string(request.inputs_size()) +
                           " inputs; it must have one per input when used");
  }
  if (request.inputs_size() == 0) return InvalidArgument("the inference request has no inputs");
  std::vector<NamedTensor> inputs;
  inputs.reserve(static_cast<size_t>(request.inputs_size()));
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    const std::string what = "input '" + input.name() + "'";
    if (input.name().empty()) return InvalidArgument("input " + std::to_string(i) + " has no name");
    for (const auto& other : inputs) {
      if (other.name == input.name()) return InvalidArgument(what + " is given twice");
    }
    runtime::DataType dtype;
    if (!runtime::DataTypeFromName(input.datatype(), &dtype)) {
      return InvalidArgument(what + ": unknown datatype '" + input.datatype() + "'");
    }
    runtime::Shape shape(input.shape().begin(), input.shape().end());
    MF_RETURN_IF_ERROR(CheckRequestShape(dtype, shape, what));
    if (raw) {
      for (const auto& field : ContentsFields(input.contents())) {
        if (field.count > 0) {
          return InvalidArgument(what + " has " + field.name + " although the request uses raw_input_contents");
        }
      }
      MF_ASSIGN_OR_RETURN(runtime::Tensor tensor,
                          TensorFromV2Raw(dtype, std::move(shape), request.raw_input_contents(i), what));
      inputs.push_back({input.name(), std::move(tensor)});
    } else {
      MF_ASSIGN_OR_RETURN(NamedTensor tensor, InputFromContents(input, dtype, std::move(shape), what));
      inputs.push_back(std::move(tensor));
    }
  }
  return inputs;
}

void AddOutputsToModelInferResponse(std::span<const NamedTensorView> outputs, V2OutputEncoding encoding,
                                    inference::ModelInferResponse* response) {
  bool raw = encoding == V2OutputEncoding::kRaw;
  for (const auto& output : outputs) {
    raw = raw || ContentsFieldFor(output.tensor->dtype()) == nullptr;
  }
  for (const auto& output : outputs) {
    const runtime::Tensor& tensor = *output.tensor;
    auto* out = response->add_outputs();
    out->set_name(std::string(output.name));
    out->set_datatype(std::string(runtime::DataTypeName(tensor.dtype())));
    for (int64_t d : tensor.shape()) out->add_shape(d);
    if (raw) {
      AppendV2Raw(tensor, response->add_raw_output_contents());
    } else {
      FillContents(tensor, out->mutable_contents());
    }
  }
}

void SignatureToV2Metadata(const ModelSignature& signature, inference::ModelMetadataResponse* proto) {
  auto fill = [](const std::vector<runtime::TensorInfo>& infos, auto* list) {
    for (const auto& info : infos) {
      auto* out = list->Add();
      out->set_name(info.name);
      out->set_datatype(std::string(runtime::DataTypeName(info.dtype)));
      for (int64_t d : info.shape) out->add_shape(d);
    }
  };
  fill(signature.inputs, proto->mutable_inputs());
  fill(signature.outputs, proto->mutable_outputs());
}

}  // namespace mf::codec
