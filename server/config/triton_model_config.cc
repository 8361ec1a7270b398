#include "server/config/triton_model_config.h"

#include <google/protobuf/descriptor.h>

#include <cstdint>

#include "server/codec/json_writer.h"

namespace mf::server {
namespace {

inference::DataType TritonDataType(runtime::DataType dtype) {
  switch (dtype) {
    case runtime::DataType::kFloat32:
      return inference::TYPE_FP32;
    case runtime::DataType::kFloat16:
      return inference::TYPE_FP16;
    case runtime::DataType::kBFloat16:
      return inference::TYPE_BF16;
    case runtime::DataType::kFloat64:
      return inference::TYPE_FP64;
    case runtime::DataType::kInt8:
      return inference::TYPE_INT8;
    case runtime::DataType::kInt16:
      return inference::TYPE_INT16;
    case runtime::DataType::kInt32:
      return inference::TYPE_INT32;
    case runtime::DataType::kInt64:
      return inference::TYPE_INT64;
    case runtime::DataType::kUInt8:
      return inference::TYPE_UINT8;
    case runtime::DataType::kUInt16:
      return inference::TYPE_UINT16;
    case runtime::DataType::kUInt32:
      return inference::TYPE_UINT32;
    case runtime::DataType::kUInt64:
      return inference::TYPE_UINT64;
    case runtime::DataType::kBool:
      return inference::TYPE_BOOL;
    case runtime::DataType::kString:
      return inference::TYPE_STRING;
  }
  return inference::TYPE_INVALID;
}

// With batching the batch dimension is implicit (Triton's dims leave it out).
template <typename Dims>
void AddDims(const runtime::TensorInfo& info, bool batched, Dims* dims) {
  for (size_t i = batched ? 1 : 0; i < info.shape.size(); ++i) dims->Add(info.shape[i]);
}

template <typename Enum>
void AppendEnumName(std::string* out, const google::protobuf::EnumDescriptor* descriptor, Enum value) {
  const google::protobuf::EnumValueDescriptor* named = descriptor->FindValueByNumber(static_cast<int>(value));
  codec::json::AppendString(out, named ? named->name() : std::to_string(static_cast<int>(value)));
}

template <typename Ints>
void AppendIntList(std::string* out, const Ints& values) {
  out->push_back('[');
  bool first = true;
  for (auto v : values) {
    if (!first) out->push_back(',');
    first = false;
    codec::json::AppendInt(out, static_cast<int64_t>(v));
  }
  out->push_back(']');
}

void AppendKey(std::string* out, std::string_view key) {
  if (out->back() != '{') out->push_back(',');
  codec::json::AppendString(out, key);
  out->push_back(':');
}

void AppendBool(std::string* out, std::string_view key, bool value) {
  AppendKey(out, key);
  out->append(value ? "true" : "false");
}

void AppendText(std::string* out, std::string_view key, std::string_view value) {
  AppendKey(out, key);
  codec::json::AppendString(out, value);
}

}  // namespace

inference::ModelConfig TritonModelConfig(std::string_view model, const Servable& servable,
                                         const VersionPolicy& policy) {
  inference::ModelConfig config;
  config.set_name(std::string(model));
  config.set_platform(std::string(kTritonOnnxPlatform));
  config.set_backend("onnxruntime");
  config.set_default_model_filename("model.onnx");
  switch (policy.kind) {
    case VersionPolicy::Kind::kLatest:
      config.mutable_version_policy()->mutable_latest()->set_num_versions(static_cast<uint32_t>(policy.num_versions));
      break;
    case VersionPolicy::Kind::kAll:
      config.mutable_version_policy()->mutable_all();
      break;
    case VersionPolicy::Kind::kSpecific:
      for (int64_t v : policy.versions) config.mutable_version_policy()->mutable_specific()->add_versions(v);
      break;
  }
  const std::optional<Servable::Batching> batching = servable.batching();
  if (batching) {
    config.set_max_batch_size(static_cast<int32_t>(std::min<int64_t>(batching->max_batch_size, INT32_MAX)));
    inference::ModelDynamicBatching* dynamic = config.mutable_dynamic_batching();
    for (int64_t size : batching->allowed_batch_sizes) {
      dynamic->add_preferred_batch_size(static_cast<int32_t>(std::min<int64_t>(size, INT32_MAX)));
    }
    dynamic->set_max_queue_delay_microseconds(static_cast<uint64_t>(batching->max_queue_delay.count()));
    dynamic->set_preserve_ordering(false);
  }
  const runtime::Signature& signature = servable.signature();
  for (const runtime::TensorInfo& info : signature.inputs) {
    inference::ModelInput* input = config.add_input();
    input->set_name(info.name);
    input->set_data_type(TritonDataType(info.dtype));
    AddDims(info, batching.has_value(), input->mutable_dims());
  }
  for (const runtime::TensorInfo& info : signature.outputs) {
    inference::ModelOutput* output = config.add_output();
    output->set_name(info.name);
    output->set_data_type(TritonDataType(info.dtype));
    AddDims(info, batching.has_value(), output->mutable_dims());
  }
  inference::ModelInstanceGroup* group = config.add_instance_group();
  group->set_name(std::string(model));
  group->set_count(1);
  if (servable.device() == "cuda") {
    group->set_kind(inference::ModelInstanceGroup::KIND_GPU);
    group->add_gpus(0);
  } else {
    group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  }
  return config;
}

std::string TritonModelConfigJson(const inference::ModelConfig& config) {
  std::string out = "{";
  AppendText(&out, "name", config.name());
  AppendText(&out, "platform", config.platform());
  AppendText(&out, "backend", config.backend());
  AppendKey(&out, "version_policy");
  const inference::ModelVersionPolicy& policy = config.version_policy();
  switch (policy.policy_choice_case()) {
    case inference::ModelVersionPolicy::kAll:
      out.append("{\"all\":{}}");
      break;
    case inference::ModelVersionPolicy::kSpecific:
      out.append("{\"specific\":{\"versions\":");
      AppendIntList(&out, policy.specific().versions());
      out.append("}}");
      break;
    default:
      out.append("{\"latest\":{\"num_versions\":");
      codec::json::AppendUInt(&out, policy.latest().num_versions());
      out.append("}}");
      break;
  }
  AppendKey(&out, "max_batch_size");
  codec::json::AppendInt(&out, config.max_batch_size());
  AppendKey(&out, "input");
  out.push_back('[');
  for (int i = 0; i < config.input_size(); ++i) {
    const inference::ModelInput& input = config.input(i);
    out.append(i ? ",{" : "{");
    AppendText(&out, "name", input.name());
    AppendKey(&out, "data_type");
    AppendEnumName(&out, inference::DataType_descriptor(), input.data_type());
    AppendKey(&out, "format");
    AppendEnumName(&out, inference::ModelInput::Format_descriptor(), input.format());
    AppendKey(&out, "dims");
    AppendIntList(&out, input.dims());
    AppendBool(&out, "is_shape_tensor", input.is_shape_tensor());
    AppendBool(&out, "allow_ragged_batch", input.allow_ragged_batch());
    AppendBool(&out, "optional", input.optional());
    out.push_back('}');
  }
  out.push_back(']');
  AppendKey(&out, "output");
  out.push_back('[');
  for (int i = 0; i < config.output_size(); ++i) {
    const inference::ModelOutput& output = config.output(i);
    out.append(i ? ",{" : "{");
    AppendText(&out, "name", output.name());
    AppendKey(&out, "data_type");
    AppendEnumName(&out, inference::DataType_descriptor(), output.data_type());
    AppendKey(&out, "dims");
    AppendIntList(&out, output.dims());
    AppendText(&out, "label_filename", output.label_filename());
    AppendBool(&out, "is_shape_tensor", output.is_shape_tensor());
    out.push_back('}');
  }
  out.push_back(']');
  if (config.has_dynamic_batching()) {
    const inference::ModelDynamicBatching& dynamic = config.dynamic_batching();
    AppendKey(&out, "dynamic_batching");
    out.append("{\"preferred_batch_size\":");
    AppendIntList(&out, dynamic.preferred_batch_size());
    out.append(",\"max_queue_delay_microseconds\":");
    codec::json::AppendUInt(&out, dynamic.max_queue_delay_microseconds());
    AppendBool(&out, "preserve_ordering", dynamic.preserve_ordering());
    out.push_back('}');
  }
  AppendKey(&out, "instance_group");
  out.push_back('[');
  for (int i = 0; i < config.instance_group_size(); ++i) {
    const inference::ModelInstanceGroup& group = config.instance_group(i);
    out.append(i ? ",{" : "{");
    AppendText(&out, "name", group.name());
    AppendKey(&out, "kind");
    AppendEnumName(&out, inference::ModelInstanceGroup::Kind_descriptor(), group.kind());
    AppendKey(&out, "count");
    codec::json::AppendInt(&out, group.count());
    AppendKey(&out, "gpus");
    AppendIntList(&out, group.gpus());
    out.push_back('}');
  }
  out.push_back(']');
  AppendText(&out, "default_model_filename", config.default_model_filename());
  out.push_back('}');
  return out;
}

}  // namespace mf::server
