#include "server/codec/tensor_proto.h"

#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "server/codec/json_tensor_reader.h"

namespace mf::codec {
namespace {

using runtime::DataType;
using tensorflow::TensorProto;

// The *_val fields a TensorProto can carry values in, with their counts.
struct ValueField {
  const char* name;
  int count;
};

std::vector<ValueField> ValueFields(const TensorProto& p) {
  return {{"half_val", p.half_val_size()},         {"float_val", p.float_val_size()},
          {"double_val", p.double_val_size()},     {"int_val", p.int_val_size()},
          {"string_val", p.string_val_size()},     {"scomplex_val", p.scomplex_val_size()},
          {"int64_val", p.int64_val_size()},       {"bool_val", p.bool_val_size()},
          {"dcomplex_val", p.dcomplex_val_size()}, {"resource_handle_val", p.resource_handle_val_size()},
          {"variant_val", p.variant_val_size()},   {"uint32_val", p.uint32_val_size()},
          {"uint64_val", p.uint64_val_size()},     {"float8_val", p.float8_val().empty() ? 0 : 1}};
}

// The field TF keeps values of `dtype` in.
const char* FieldFor(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return "float_val";
    case DataType::kFloat64:
      return "double_val";
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return "half_val";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kUInt8:
    case DataType::kUInt16:
      return "int_val";
    case DataType::kInt64:
      return "int64_val";
    case DataType::kUInt32:
      return "uint32_val";
    case DataType::kUInt64:
      return "uint64_val";
    case DataType::kBool:
      return "bool_val";
    case DataType::kString:
      return "string_val";
  }
  return "";
}

std::string TfName(DataType dtype) { return tensorflow::DataType_Name(ToTfDataType(dtype)); }

// Copies `count` values (1 = broadcast) from a repeated field into the tensor, converting each
// with `convert`, which returns false for a value out of the dtype's range.
template <typename Out, typename Field, typename Convert>
Status FillFrom(const Field& field, runtime::Tensor* tensor, Convert&& convert, DataType dtype) {
  Out* data = tensor->data<Out>();
  const int64_t n = tensor->num_elements();
  const bool broadcast = field.size() == 1;
  for (int64_t i = 0; i < (broadcast ? 1 : n); ++i) {
    if (!convert(field.Get(static_cast<int>(i)), &data[i])) {
      return InvalidArgument("value " + std::to_string(field.Get(static_cast<int>(i))) + " at index " +
                             std::to_string(i) + " is out of range for " + TfName(dtype));
    }
  }
  if (broadcast) std::fill(data + 1, data + n, data[0]);
  return Status::Ok();
}

template <typename Out>
bool NarrowInt(int32_t v, Out* out) {
  if (v < static_cast<int32_t>(std::numeric_limits<Out>::min()) ||
      v > static_cast<int32_t>(std::numeric_limits<Out>::max())) {
    return false;
  }
  *out = static_cast<Out>(v);
  return true;
}

template <typename T>
bool Same(T v, T* out) {
  *out = v;
  return true;
}

Status FillTyped(const TensorProto& p, runtime::Tensor* t) {
  const DataType dtype = t->dtype();
  switch (dtype) {
    case DataType::kFloat32:
      return FillFrom<float>(p.float_val(), t, Same<float>, dtype);
    case DataType::kFloat64:
      return FillFrom<double>(p.double_val(), t, Same<double>, dtype);
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return FillFrom<uint16_t>(p.half_val(), t, NarrowInt<uint16_t>, dtype);
    case DataType::kInt8:
      return FillFrom<int8_t>(p.int_val(), t, NarrowInt<int8_t>, dtype);
    case DataType::kInt16:
      return FillFrom<int16_t>(p.int_val(), t, NarrowInt<int16_t>, dtype);
    case DataType::kInt32:
      return FillFrom<int32_t>(p.int_val(), t, Same<int32_t>, dtype);
    case DataType::kUInt8:
      return FillFrom<uint8_t>(p.int_val(), t, NarrowInt<uint8_t>, dtype);
    case DataType::kUInt16:
      return FillFrom<uint16_t>(p.int_val(), t, NarrowInt<uint16_t>, dtype);
    case DataType::kInt64:
      return FillFrom<int64_t>(p.int64_val(), t, Same<int64_t>, dtype);
    case DataType::kUInt32:
      return FillFrom<uint32_t>(p.uint32_val(), t, Same<uint32_t>, dtype);
    case DataType::kUInt64:
      return FillFrom<uint64_t>(p.uint64_val(), t, Same<uint64_t>, dtype);
    case DataType::kBool:
      return FillFrom<uint8_t>(
          p.bool_val(), t,
          [](bool v, uint8_t* out) {
            *out = v ? 1 : 0;
            return true;
          },
          dtype);
    case DataType::kString: {
      auto& strings = t->strings();
      if (p.string_val_size() == 1) {
        std::fill(strings.begin(), strings.end(), p.string_val(0));
      } else {
        for (int i = 0; i < p.string_val_size(); ++i) strings[static_cast<size_t>(i)] = p.string_val(i);
      }
      return Status::Ok();
    }
  }
  return Internal("unhandled dtype");
}

template <typename In, typename Adder>
void AddAll(const runtime::Tensor& t, Adder&& add) {
  const In* data = t.data<In>();
  for (int64_t i = 0; i < t.num_elements(); ++i) add(data[i]);
}

}  // namespace

tensorflow::DataType ToTfDataType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return tensorflow::DT_FLOAT;
    case DataType::kFloat16:
      return tensorflow::DT_HALF;
    case DataType::kBFloat16:
      return tensorflow::DT_BFLOAT16;
    case DataType::kFloat64:
      return tensorflow::DT_DOUBLE;
    case DataType::kInt8:
      return tensorflow::DT_INT8;
    case DataType::kInt16:
      return tensorflow::DT_INT16;
    case DataType::kInt32:
      return tensorflow::DT_INT32;
    case DataType::kInt64:
      return tensorflow::DT_INT64;
    case DataType::kUInt8:
      return tensorflow::DT_UINT8;
    case DataType::kUInt16:
      return tensorflow::DT_UINT16;
    case DataType::kUInt32:
      return tensorflow::DT_UINT32;
    case DataType::kUInt64:
      return tensorflow::DT_UINT64;
    case DataType::kBool:
      return tensorflow::DT_BOOL;
    case DataType::kString:
      return tensorflow::DT_STRING;
  }
  return tensorflow::DT_INVALID;
}

StatusOr<DataType> FromTfDataType(tensorflow::DataType dtype) {
  switch (dtype) {
    case tensorflow::DT_FLOAT:
      return DataType::kFloat32;
    case tensorflow::DT_HALF:
      return DataType::kFloat16;
    case tensorflow::DT_BFLOAT16:
      return DataType::kBFloat16;
    case tensorflow::DT_DOUBLE:
      return DataType::kFloat64;
    case tensorflow::DT_INT8:
      return DataType::kInt8;
    case tensorflow::DT_INT16:
      return DataType::kInt16;
    case tensorflow::DT_INT32:
      return DataType::kInt32;
    case tensorflow::DT_INT64:
      return DataType::kInt64;
    case tensorflow::DT_UINT8:
      return DataType::kUInt8;
    case tensorflow::DT_UINT16:
      return DataType::kUInt16;
    case tensorflow::DT_UINT32:
      return DataType::kUInt32;
    case tensorflow::DT_UINT64:
      return DataType::kUInt64;
    case tensorflow::DT_BOOL:
      return DataType::kBool;
    case tensorflow::DT_STRING:
      return DataType::kString;
    default:
      break;
  }
  const std::string& name = tensorflow::DataType_Name(dtype);
  return InvalidArgument("tensor dtype " + (name.empty() ? std::to_string(static_cast<int>(dtype)) : name) +
                         " is not supported (supported: float, double, half, bfloat16, int8..int64, "
                         "uint8..uint64, bool, string)");
}

StatusOr<runtime::Tensor> TensorFromProto(const TensorProto& proto) {
  MF_ASSIGN_OR_RETURN(DataType dtype, FromTfDataType(proto.dtype()));
  const auto& shape_proto = proto.tensor_shape();
  if (shape_proto.unknown_rank()) return InvalidArgument("tensor_shape has unknown_rank set; a tensor needs a shape");
  if (shape_proto.dim_size() > json::kMaxNesting) {
    return InvalidArgument("tensor rank " + std::to_string(shape_proto.dim_size()) + " exceeds the limit of " +
                           std::to_string(json::kMaxNesting));
  }
  runtime::Shape shape;
  for (const auto& dim : shape_proto.dim()) {
    if (dim.size() < 0) return InvalidArgument("tensor_shape has negative dimension " + std::to_string(dim.size()));
    shape.push_back(dim.size());
  }
  const int64_t n = runtime::NumElements(shape);
  const size_t per_element = dtype == DataType::kString ? sizeof(std::string) : runtime::ElementSize(dtype);
  if (n < 0 || static_cast<uint64_t>(n) > runtime::kMaxTensorBytes / per_element) {
    return InvalidArgument("tensor shape " + runtime::ShapeToString(shape) + " is too large (limit " +
                           std::to_string(runtime::kMaxTensorBytes >> 20) + " MiB)");
  }

  const char* expected = FieldFor(dtype);
  const bool has_content = !proto.tensor_content().empty();
  int values = 0;
  for (const auto& field : ValueFields(proto)) {
    if (field.count == 0) continue;
    if (has_content || std::strcmp(field.name, expected) != 0) {
      return InvalidArgument(TfName(dtype) + " tensor carries values in " + field.name +
                             (has_content ? " as well as in tensor_content" : std::string("; expected ") + expected));
    }
    values = field.count;
  }

  if (has_content) {
    if (dtype == DataType::kString) return InvalidArgument("DT_STRING tensors must use string_val, not tensor_content");
    const size_t expected_bytes = static_cast<size_t>(n) * per_element;
    if (proto.tensor_content().size() != expected_bytes) {
      return InvalidArgument("tensor_content holds " + std::to_string(proto.tensor_content().size()) +
                             " bytes but shape " + runtime::ShapeToString(shape) + " of " + TfName(dtype) + " needs " +
                             std::to_string(expected_bytes));
    }
    return runtime::Tensor::FromBytes(dtype, std::move(shape), proto.tensor_content());
  }

  if (values != n && !(values == 1 && n > 0)) {
    return InvalidArgument(TfName(dtype) + " tensor of shape " + runtime::ShapeToString(shape) + " (" +
                           std::to_string(n) + " elements) has " + std::to_string(values) + " values in " + expected +
                           "; expected " + std::to_string(n) + " or a single value to broadcast");
  }
  if (values == 1 && n > 1) {
    const size_t element_bytes =
        dtype == DataType::kString ? sizeof(std::string) + proto.string_val(0).size() : per_element;
    if (static_cast<uint64_t>(n) > kMaxBroadcastBytes / element_bytes) {
      return InvalidArgument("broadcasting one value to shape " + runtime::ShapeToString(shape) +
                             " would take more than " + std::to_string(kMaxBroadcastBytes >> 20) +
                             " MiB; send the values or tensor_content instead");
    }
  }
  MF_ASSIGN_OR_RETURN(runtime::Tensor tensor, runtime::Tensor::Allocate(dtype, std::move(shape)));
  if (n > 0) MF_RETURN_IF_ERROR(FillTyped(proto, &tensor));
  return tensor;
}

void TensorToProto(const runtime::Tensor& t, TensorProtoEncoding encoding, TensorProto* proto) {
  proto->Clear();
  proto->set_dtype(ToTfDataType(t.dtype()));
  auto* shape = proto->mutable_tensor_shape();
  for (int64_t d : t.shape()) shape->add_dim()->set_size(d);
  if (t.dtype() == DataType::kString) {
    auto* out = proto->mutable_string_val();
    out->Reserve(static_cast<int>(t.strings().size()));
    for (const auto& s : t.strings()) out->Add(std::string(s));
    return;
  }
  if (encoding == TensorProtoEncoding::kTensorContent) {
    proto->set_tensor_content(std::string(t.bytes()));
    return;
  }
  switch (t.dtype()) {
    case DataType::kFloat32:
      proto->mutable_float_val()->Add(t.data<float>(), t.data<float>() + t.num_elements());
      break;
    case DataType::kFloat64:
      proto->mutable_double_val()->Add(t.data<double>(), t.data<double>() + t.num_elements());
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kUInt16: {
      auto* out = t.dtype() == DataType::kUInt16 ? proto->mutable_int_val() : proto->mutable_half_val();
      AddAll<uint16_t>(t, [out](uint16_t v) { out->Add(v); });
      break;
    }
    case DataType::kInt8:
      AddAll<int8_t>(t, [proto](int8_t v) { proto->add_int_val(v); });
      break;
    case DataType::kInt16:
      AddAll<int16_t>(t, [proto](int16_t v) { proto->add_int_val(v); });
      break;
    case DataType::kUInt8:
      AddAll<uint8_t>(t, [proto](uint8_t v) { proto->add_int_val(v); });
      break;
    case DataType::kInt32:
      proto->mutable_int_val()->Add(t.data<int32_t>(), t.data<int32_t>() + t.num_elements());
      break;
    case DataType::kInt64:
      proto->mutable_int64_val()->Add(t.data<int64_t>(), t.data<int64_t>() + t.num_elements());
      break;
    case DataType::kUInt32:
      proto->mutable_uint32_val()->Add(t.data<uint32_t>(), t.data<uint32_t>() + t.num_elements());
      break;
    case DataType::kUInt64:
      proto->mutable_uint64_val()->Add(t.data<uint64_t>(), t.data<uint64_t>() + t.num_elements());
      break;
    case DataType::kBool:
      AddAll<uint8_t>(t, [proto](uint8_t v) { proto->add_bool_val(v != 0); });
      break;
    case DataType::kString:
      break;
  }
}

void SignatureToProto(const ModelSignature& signature, tensorflow::SignatureDef* proto) {
  proto->Clear();
  proto->set_method_name(signature.method_name);
  auto fill = [](const std::vector<runtime::TensorInfo>& infos,
                 google::protobuf::Map<std::string, tensorflow::TensorInfo>* map) {
    for (const auto& info : infos) {
      tensorflow::TensorInfo& out = (*map)[info.name];
      out.set_name(info.name);
      out.set_dtype(ToTfDataType(info.dtype));
      for (int64_t d : info.shape) out.mutable_tensor_shape()->add_dim()->set_size(d);
    }
  };
  fill(signature.inputs, proto->mutable_inputs());
  fill(signature.outputs, proto->mutable_outputs());
}

void VersionStatusToProto(const ModelVersionStatus& status, tensorflow::serving::ModelVersionStatus* proto) {
  proto->Clear();
  proto->set_version(status.version);
  proto->set_state(static_cast<tensorflow::serving::ModelVersionStatus::State>(status.state));
  // StatusCode values are the canonical codes, the same numbers as tensorflow.error.Code.
  proto->mutable_status()->set_error_code(static_cast<tensorflow::error::Code>(status.status.code()));
  proto->mutable_status()->set_error_message(status.status.message());
}

}  // namespace mf::codec
