#include "runtime/onnx_tensor.h"

#include <fcntl.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace mf::runtime {
namespace {

namespace fs = std::filesystem;

// Where a tensor's external data lies: [offset, offset + length) of `file`, checked to be
// inside the model directory and inside the file.
struct ExternalRange {
  fs::path file;
  std::string location;  // as the model wrote it, for messages
  int64_t offset = 0;
  int64_t length = 0;
};

// Resolves a tensor's external data, refusing any path that leaves the model directory
// (absolute paths, "..", symlinks pointing outside) and any range beyond the file's end.
StatusOr<ExternalRange> ResolveExternalData(const onnx::TensorProto& proto, const std::string& model_dir) {
  ExternalRange r;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    try {
      if (entry.key() == "location")
        r.location = entry.value();
      else if (entry.key() == "offset")
        r.offset = std::stoll(entry.value());
      else if (entry.key() == "length")
        length = std::stoll(entry.value());
    } catch (const std::exception&) {
      return InvalidArgument("external data entry '" + entry.key() + "' is not a number: '" + entry.value() + "'");
    }
  }
  const std::string& location = r.location;
  if (model_dir.empty()) return InvalidArgument("external data is not allowed for a model loaded from bytes");
  if (location.empty()) return InvalidArgument("external data without a location");
  fs::path rel(location);
  if (rel.is_absolute()) return InvalidArgument("external data location '" + location + "' must be relative");
  for (const auto& part : rel) {
    if (part == "..") return InvalidArgument("external data location '" + location + "' escapes the model directory");
  }
  std::error_code ec;
  fs::path dir = fs::canonical(model_dir, ec);
  if (ec) return NotFound("model directory '" + model_dir + "': " + ec.message());
  r.file = fs::canonical(dir / rel, ec);
  if (ec) return NotFound("external data file '" + location + "': " + ec.message());
  auto [mismatch, unused] = std::mismatch(dir.begin(), dir.end(), r.file.begin(), r.file.end());
  if (mismatch != dir.end()) {
    return InvalidArgument("external data location '" + location + "' resolves outside the model directory");
  }
  uintmax_t size = fs::file_size(r.file, ec);
  if (ec) return NotFound("external data file '" + location + "': " + ec.message());
  if (r.offset < 0 || static_cast<uintmax_t>(r.offset) > size) {
    return InvalidArgument("external data offset " + std::to_string(r.offset) + " is outside '" + location + "'");
  }
  if (length < 0) length = static_cast<int64_t>(size - static_cast<uintmax_t>(r.offset));
  if (static_cast<uintmax_t>(length) > size - static_cast<uintmax_t>(r.offset) ||
      static_cast<uint64_t>(length) > kMaxTensorBytes) {
    return InvalidArgument("external data length " + std::to_string(length) + " exceeds '" + location + "'");
  }
  r.length = length;
  return r;
}

// Reads the range into `out` (exactly r.length bytes).
Status ReadExternalData(const ExternalRange& r, void* out) {
  const int fd = ::open(r.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return DataLoss("cannot open external data '" + r.location + "': " + std::strerror(errno));
  Status s = ReadFileRange(fd, static_cast<uint64_t>(r.offset), static_cast<uint64_t>(r.length), out);
  ::close(fd);
  if (!s.ok()) return DataLoss("cannot read external data '" + r.location + "': " + s.message());
  return Status::Ok();
}

// The loader frees each initializer's proto copy right after allocating the graph's copy above
// it: its pages go back first (ReleaseResidentPages), or the weights would stay resident twice
// until the whole load ended.
void ReleasePages(std::string& dead) { ReleaseResidentPages(dead.data(), dead.capacity()); }

// Copies a typed repeated field into the tensor, converting each element to T.
template <typename T, typename Field>
Status CopyField(const Field& field, Tensor* t, const char* field_name) {
  if (field.size() != t->num_elements()) {
    return InvalidArgument(std::string(field_name) + " holds " + std::to_string(field.size()) + " values, the shape " +
                           ShapeToString(t->shape()) + " needs " + std::to_string(t->num_elements()));
  }
  T* out = t->data<T>();
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<T>(field.Get(i));
  return Status::Ok();
}

// int32_data carries float16/bfloat16 as their bit patterns.
template <typename T>
Status CopyBits16(const google::protobuf::RepeatedField<int32_t>& field, Tensor* t) {
  if (field.size() != t->num_elements()) return InvalidArgument("int32_data size does not match the shape");
  auto* out = t->data<uint16_t>();
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<uint16_t>(field.Get(i));
  return Status::Ok();
}

}  // namespace

// In slices: one read() of a whole weight copies megabytes into fresh pages in a single system
// call, which a request waiting for the same core cannot preempt (seen to hold it 10-15 ms on a
// non-preemptible kernel); between slices it can. 32 KiB rather than 128: another model's p99
// under open-loop traffic went from 1.14-1.21x to 1.07-1.10x while this one loads
// (docs/benchmarks.md), at no measurable cost in load time.
Status ReadFileRange(int fd, uint64_t offset, uint64_t length, void* out) {
  constexpr uint64_t kSliceBytes = 32 << 10;
  auto* dst = static_cast<char*>(out);
  for (uint64_t done = 0; done < length;) {
    const auto want = static_cast<size_t>(std::min(kSliceBytes, length - done));
    const ssize_t n = ::pread(fd, dst + done, want, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return DataLoss(std::string("read failed: ") + std::strerror(errno));
    if (n == 0) return DataLoss("the file ended early (it changed while it was read)");
    done += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

StatusOr<DataType> DataTypeFromOnnx(int onnx_type) {
  using TP = onnx::TensorProto;
  switch (onnx_type) {
    case TP::FLOAT:
      return DataType::kFloat32;
    case TP::UINT8:
      return DataType::kUInt8;
    case TP::INT8:
      return DataType::kInt8;
    case TP::UINT16:
      return DataType::kUInt16;
    case TP::INT16:
      return DataType::kInt16;
    case TP::INT32:
      return DataType::kInt32;
    case TP::INT64:
      return DataType::kInt64;
    case TP::STRING:
      return DataType::kString;
    case TP::BOOL:
      return DataType::kBool;
    case TP::FLOAT16:
      return DataType::kFloat16;
    case TP::DOUBLE:
      return DataType::kFloat64;
    case TP::UINT32:
      return DataType::kUInt32;
    case TP::UINT64:
      return DataType::kUInt64;
    case TP::BFLOAT16:
      return DataType::kBFloat16;
    default:
      return Unimplemented("ONNX element type " + std::to_string(onnx_type) + " is not supported");
  }
}

int DataTypeToOnnx(DataType dtype) {
  using TP = onnx::TensorProto;
  switch (dtype) {
    case DataType::kFloat32:
      return TP::FLOAT;
    case DataType::kFloat16:
      return TP::FLOAT16;
    case DataType::kBFloat16:
      return TP::BFLOAT16;
    case DataType::kFloat64:
      return TP::DOUBLE;
    case DataType::kInt8:
      return TP::INT8;
    case DataType::kInt16:
      return TP::INT16;
    case DataType::kInt32:
      return TP::INT32;
    case DataType::kInt64:
      return TP::INT64;
    case DataType::kUInt8:
      return TP::UINT8;
    case DataType::kUInt16:
      return TP::UINT16;
    case DataType::kUInt32:
      return TP::UINT32;
    case DataType::kUInt64:
      return TP::UINT64;
    case DataType::kBool:
      return TP::BOOL;
    case DataType::kString:
      return TP::STRING;
  }
  return TP::UNDEFINED;
}

namespace {

// `consume_raw`: the proto is freed right after (TakeTensorFromOnnx), so its raw_data pages are
// handed back as they are copied and the weights are never resident twice.
StatusOr<Tensor> TensorFromOnnxImpl(const onnx::TensorProto& proto, const std::string& model_dir, bool consume_raw,
                                    const RawDataInFile* in_file) {
  const std::string what = proto.name().empty() ? std::string("tensor") : "tensor '" + proto.name() + "'";
  if (proto.has_segment()) return Unimplemented(what + ": segmented tensors are not supported");
  auto dtype_or = DataTypeFromOnnx(proto.data_type());
  if (!dtype_or.ok()) return dtype_or.status().WithContext(what);
  DataType dtype = *dtype_or;
  Shape shape(proto.dims().begin(), proto.dims().end());
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument(what + ": negative dim in shape " + ShapeToString(shape));
  }
  int64_t n = NumElements(shape);
  if (n < 0) return InvalidArgument(what + ": shape " + ShapeToString(shape) + " overflows");

  const bool external = proto.data_location() == onnx::TensorProto::EXTERNAL;
  const bool raw = external || proto.has_raw_data() || in_file != nullptr;
  if (dtype == DataType::kString) {
    if (raw) return InvalidArgument(what + ": string tensors cannot use raw_data");
    if (proto.string_data_size() != n) return InvalidArgument(what + ": string_data size does not match the shape");
    MF_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
    for (int i = 0; i < proto.string_data_size(); ++i) t.strings()[static_cast<size_t>(i)] = proto.string_data(i);
    return t;
  }
  if (raw) {
    // Check the size before allocating: the bytes actually present (in the proto or in the
    // external file) bound the allocation.
    uint64_t present = in_file != nullptr ? in_file->length : proto.raw_data().size();
    ExternalRange range;
    if (external && in_file != nullptr) return InvalidArgument(what + ": raw_data and external data at once");
    if (external) {
      auto resolved = ResolveExternalData(proto, model_dir);
      if (!resolved.ok()) return resolved.status().WithContext(what);
      range = std::move(resolved).value();
      present = static_cast<uint64_t>(range.length);
    }
    if (present != static_cast<uint64_t>(n) * ElementSize(dtype)) {
      return InvalidArgument(what + ": holds " + std::to_string(present) + " bytes of data, shape " +
                             ShapeToString(shape) + " of " + std::string(DataTypeName(dtype)) + " needs " +
                             std::to_string(static_cast<uint64_t>(n) * ElementSize(dtype)));
    }
    if (in_file != nullptr) {
      auto t = Tensor::AllocateForWeights(dtype, shape);
      if (!t.ok()) return t.status().WithContext(what);
      MF_RETURN_IF_ERROR(ReadFileRange(in_file->fd, in_file->offset, in_file->length, t->raw_data())
                             .WithContext(what + ": the model file"));
      return t;
    }
    if (!external && !consume_raw) {
      auto t = Tensor::FromBytes(dtype, shape, proto.raw_data());
      if (!t.ok()) return t.status().WithContext(what);
      return t;
    }
    if (!external) {
      auto t = Tensor::AllocateForWeights(dtype, shape);
      if (!t.ok()) return t.status().WithContext(what);
      CopyReleasingSource(t->raw_data(), proto.raw_data().data(), proto.raw_data().size());
      return t;
    }
    // Straight from the file into the tensor: no intermediate copy of the weights.
    auto t = Tensor::AllocateForWeights(dtype, shape);
    if (!t.ok()) return t.status().WithContext(what);
    MF_RETURN_IF_ERROR(ReadExternalData(range, t->raw_data()).WithContext(what));
    return t;
  }
  // Typed fields: their element count bounds the allocation too (checked in CopyField before
  // any write, and n is compared to the field size before Allocate below).
  int64_t available = 0;
  switch (dtype) {
    case DataType::kFloat32:
      available = proto.float_data_size();
      break;
    case DataType::kFloat64:
      available = proto.double_data_size();
      break;
    case DataType::kInt64:
      available = proto.int64_data_size();
      break;
    case DataType::kUInt32:
    case DataType::kUInt64:
      available = proto.uint64_data_size();
      break;
    default:
      available = proto.int32_data_size();
      break;
  }
  if (available != n) {
    return InvalidArgument(what + ": has " + std::to_string(available) + " values, shape " + ShapeToString(shape) +
                           " needs " + std::to_string(n));
  }
  MF_ASSIGN_OR_RETURN(Tensor t, Tensor::AllocateUninitialized(dtype, shape));
  Status s;
  switch (dtype) {
    case DataType::kFloat32:
      s = CopyField<float>(proto.float_data(), &t, "float_data");
      break;
    case DataType::kFloat64:
      s = CopyField<double>(proto.double_data(), &t, "double_data");
      break;
    case DataType::kInt64:
      s = CopyField<int64_t>(proto.int64_data(), &t, "int64_data");
      break;
    case DataType::kUInt32:
      s = CopyField<uint32_t>(proto.uint64_data(), &t, "uint64_data");
      break;
    case DataType::kUInt64:
      s = CopyField<uint64_t>(proto.uint64_data(), &t, "uint64_data");
      break;
    case DataType::kInt32:
      s = CopyField<int32_t>(proto.int32_data(), &t, "int32_data");
      break;
    case DataType::kInt16:
      s = CopyField<int16_t>(proto.int32_data(), &t, "int32_data");
      break;
    case DataType::kInt8:
      s = CopyField<int8_t>(proto.int32_data(), &t, "int32_data");
      break;
    case DataType::kUInt16:
      s = CopyField<uint16_t>(proto.int32_data(), &t, "int32_data");
      break;
    case DataType::kUInt8:
      s = CopyField<uint8_t>(proto.int32_data(), &t, "int32_data");
      break;
    case DataType::kBool:
      s = CopyField<bool>(proto.int32_data(), &t, "int32_data");
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      s = CopyBits16<uint16_t>(proto.int32_data(), &t);
      break;
    case DataType::kString:
      break;
  }
  if (!s.ok()) return s.WithContext(what);
  return t;
}

}  // namespace

StatusOr<Tensor> TensorFromOnnx(const onnx::TensorProto& proto, const std::string& model_dir) {
  return TensorFromOnnxImpl(proto, model_dir, /*consume_raw=*/false, nullptr);
}

StatusOr<Tensor> TakeTensorFromOnnx(onnx::TensorProto* proto, const std::string& model_dir,
                                    const RawDataInFile* raw_data_in_file) {
  // Swapping two heap-allocated messages exchanges pointers: no copy. `drained` owns the
  // payload from here and frees it on return; its raw_data pages go back as they are copied.
  onnx::TensorProto drained;
  drained.Swap(proto);
  auto t = TensorFromOnnxImpl(drained, model_dir, /*consume_raw=*/true, raw_data_in_file);
  if (drained.has_raw_data()) ReleasePages(*drained.mutable_raw_data());
  return t;
}

StatusOr<Tensor> TensorFromOnnxBytes(std::string_view bytes) {
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument("not a serialized onnx.TensorProto");
  }
  return TensorFromOnnx(proto, "");
}

}  // namespace mf::runtime
