#include "runtime/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace mf::runtime {
namespace {

struct NpyType {
  const char* descr;
  DataType dtype;
};
constexpr NpyType kTypes[] = {
    {"<f4", DataType::kFloat32}, {"<f8", DataType::kFloat64}, {"<f2", DataType::kFloat16}, {"|i1", DataType::kInt8},
    {"<i2", DataType::kInt16},   {"<i4", DataType::kInt32},   {"<i8", DataType::kInt64},   {"|u1", DataType::kUInt8},
    {"<u2", DataType::kUInt16},  {"<u4", DataType::kUInt32},  {"<u8", DataType::kUInt64},  {"|b1", DataType::kBool},
};

// The value of `key` in the header dict, up to the next ',' or '}' at nesting depth 0.
StatusOr<std::string> DictValue(std::string_view header, std::string_view key) {
  std::string quoted = "'" + std::string(key) + "'";
  size_t at = header.find(quoted);
  if (at == std::string_view::npos) return InvalidArgument("npy header has no " + quoted);
  size_t colon = header.find(':', at + quoted.size());
  if (colon == std::string_view::npos) return InvalidArgument("npy header is malformed");
  size_t i = colon + 1, depth = 0;
  std::string value;
  for (; i < header.size(); ++i) {
    char c = header[i];
    if (c == '(') ++depth;
    if (c == ')') {
      if (depth == 0) return InvalidArgument("npy header is malformed");
      --depth;
    }
    if (depth == 0 && (c == ',' || c == '}')) break;
    value += c;
  }
  if (depth != 0) return InvalidArgument("npy header is malformed");
  size_t b = value.find_first_not_of(" "), e = value.find_last_not_of(" ");
  return b == std::string::npos ? std::string() : value.substr(b, e - b + 1);
}

}  // namespace

StatusOr<Tensor> ParseNpy(std::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY") return InvalidArgument("not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len =
        static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return InvalidArgument(".npy file is truncated");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    return InvalidArgument(".npy format version " + std::to_string(major) + " is not supported");
  }
  if (header_len > bytes.size() - offset) return InvalidArgument(".npy header is truncated");
  std::string_view header = bytes.substr(offset, header_len);
  MF_ASSIGN_OR_RETURN(std::string descr, DictValue(header, "descr"));
  MF_ASSIGN_OR_RETURN(std::string fortran, DictValue(header, "fortran_order"));
  MF_ASSIGN_OR_RETURN(std::string shape_str, DictValue(header, "shape"));
  if (fortran != "False") return InvalidArgument(".npy arrays in Fortran order are not supported");
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"'))
    return InvalidArgument("npy descr is malformed");
  descr = descr.substr(1, descr.size() - 2);
  if (descr == "<b1") descr = "|b1";
  if (descr == "<i1") descr = "|i1";
  if (descr == "<u1") descr = "|u1";
  const NpyType* type = nullptr;
  for (const auto& t : kTypes) {
    if (descr == t.descr) type = &t;
  }
  if (!type) return InvalidArgument(".npy dtype '" + descr + "' is not supported (little-endian numeric or bool only)");
  if (shape_str.size() < 2 || shape_str.front() != '(' || shape_str.back() != ')') {
    return InvalidArgument("npy shape is malformed");
  }
  Shape shape;
  std::string inner = shape_str.substr(1, shape_str.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    item = item.substr(b);
    size_t used = 0;
    int64_t d = 0;
    try {
      d = std::stoll(item, &used);
    } catch (const std::exception&) {
      return InvalidArgument("npy shape entry '" + item + "' is not a number");
    }
    if (d < 0 || item.find_first_not_of(' ', used) != std::string::npos) {
      return InvalidArgument("npy shape entry '" + item + "' is invalid");
    }
    shape.push_back(d);
  }
  std::string_view data = bytes.substr(offset + header_len);
  int64_t n = NumElements(shape);
  if (n < 0 || static_cast<uint64_t>(n) * ElementSize(type->dtype) != data.size()) {
    return InvalidArgument(".npy data is " + std::to_string(data.size()) + " bytes, shape " + ShapeToString(shape) +
                           " of " + type->descr + " needs a different size");
  }
  return Tensor::FromBytes(type->dtype, shape, data);
}

StatusOr<Tensor> ReadNpyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  auto t = ParseNpy(buf.str());
  if (!t.ok()) return t.status().WithContext(path);
  return t;
}

std::string SerializeNpy(const Tensor& t) {
  const char* descr = "<f4";
  for (const auto& k : kTypes) {
    if (k.dtype == t.dtype()) descr = k.descr;
  }
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + ", ";
  if (t.rank() > 1) shape.resize(shape.size() - 2);
  if (t.rank() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(t.raw_data()), t.byte_size());
  return out;
}

Status WriteNpyFile(const std::string& path, const Tensor& t) {
  std::ofstream out(path, std::ios::binary);
  std::string bytes = SerializeNpy(t);
  if (!out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    return Internal("cannot write '" + path + "'");
  return Status::Ok();
}

}  // namespace mf::runtime
