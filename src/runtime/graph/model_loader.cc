#include "runtime/graph/model_loader.h"

#include <fcntl.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <queue>
#include <unordered_map>

#include "runtime/graph/raw_data_split.h"
#include "runtime/onnx_tensor.h"

namespace mf::runtime {
namespace {

// Read size of the file stream a model is parsed from (the only buffer besides the message).
constexpr int kParseBlockBytes = 256 << 10;
// Initializers' raw_data of at least this size is read from the file straight into the tensor
// (graph/raw_data_split.h), when what is left to parse is at most a quarter of the file plus
// 1 MiB: a model whose bytes are mostly something else is parsed as a stream instead.
constexpr uint64_t kSplitRawDataMinBytes = 64 << 10;
uint64_t MaxStructureBytes(uint64_t file_bytes) { return file_bytes / 4 + (1 << 20); }

// Takes a TENSOR attribute's payload out of `a` (a Constant node's value can be a weight).
StatusOr<Attribute> ConvertAttribute(onnx::AttributeProto& a, const std::string& model_dir) {
  using AP = onnx::AttributeProto;
  if (!a.ref_attr_name().empty()) return Unimplemented("attribute references (functions) are not supported");
  switch (a.type()) {
    case AP::INT:
      return Attribute{a.i()};
    case AP::FLOAT:
      return Attribute{a.f()};
    case AP::STRING:
      return Attribute{a.s()};
    case AP::INTS:
      return Attribute{std::vector<int64_t>(a.ints().begin(), a.ints().end())};
    case AP::FLOATS:
      return Attribute{std::vector<float>(a.floats().begin(), a.floats().end())};
    case AP::STRINGS:
      return Attribute{std::vector<std::string>(a.strings().begin(), a.strings().end())};
    case AP::TENSOR: {
      MF_ASSIGN_OR_RETURN(Tensor t, TakeTensorFromOnnx(a.mutable_t(), model_dir));
      return Attribute{std::make_shared<const Tensor>(std::move(t))};
    }
    case AP::GRAPH:
    case AP::GRAPHS:
      return Unimplemented("graph-valued attributes (control flow) are not supported");
    default:
      return Unimplemented("attribute type " + std::to_string(static_cast<int>(a.type())) + " is not supported");
  }
}

// Declared element type and shape of a graph input/output (-1 for symbolic or unknown dims).
Status ReadValueInfo(const onnx::ValueInfoProto& info, Value* v) {
  if (!info.type().has_tensor_type()) {
    return Unimplemented("graph input/output '" + info.name() +
                         "' is not a tensor (sequences and maps are not supported)");
  }
  const auto& tt = info.type().tensor_type();
  if (tt.elem_type() != 0) {
    auto dtype = DataTypeFromOnnx(tt.elem_type());
    if (!dtype.ok()) return dtype.status().WithContext("graph input/output '" + info.name() + "'");
    v->dtype = *dtype;
    v->dtype_known = true;
  }
  if (tt.has_shape()) {
    Shape shape;
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value() && d.dim_value() < 0) {
        return InvalidArgument("graph input/output '" + info.name() + "' has a negative dim");
      }
      shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
    v->shape = std::move(shape);
  }
  return Status::Ok();
}

// Where initializers' raw_data was left in the model file (by index in graph.initializer).
struct RawDataLeftInFile {
  int fd = -1;
  std::unordered_map<int, ByteSpan> spans;
};

// Builds the graph, taking each initializer's data out of `model` as it goes: a weight lives
// in the proto or in the graph, both only while that one tensor is copied.
StatusOr<Graph> ConvertModel(onnx::ModelProto& model, const std::string& model_dir,
                             const RawDataLeftInFile* in_file = nullptr) {
  Graph g;
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") g.opset = op.version();
  }
  if (g.opset == 0) {
    for (const auto& op : model.opset_import()) {
      return Unimplemented("operator set domain '" + op.domain() + "' is not supported");
    }
    return InvalidArgument("the model imports no operator set");
  }
  if (g.opset < kMinOpset || g.opset > kMaxOpset) {
    return Unimplemented("opset " + std::to_string(g.opset) + " is not supported (supported: " +
                         std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
  }
  onnx::GraphProto& gp = *model.mutable_graph();
  std::unordered_map<std::string, int> by_name;
  auto define = [&](const std::string& name, Value v) -> StatusOr<int> {
    if (name.empty()) return InvalidArgument("a value has an empty name");
    if (by_name.count(name)) return InvalidArgument("value '" + name + "' is defined more than once");
    v.name = name;
    int id = g.AddValue(std::move(v));
    by_name[name] = id;
    return id;
  };

  for (int i = 0; i < gp.initializer_size(); ++i) {
    onnx::TensorProto& init = *gp.mutable_initializer(i);
    const std::string name = init.name();  // TakeTensorFromOnnx empties `init`
    std::optional<RawDataInFile> raw_data;
    if (in_file != nullptr) {
      if (auto it = in_file->spans.find(i); it != in_file->spans.end()) {
        raw_data = RawDataInFile{in_file->fd, it->second.offset, it->second.length};
      }
    }
    auto t = TakeTensorFromOnnx(&init, model_dir, raw_data ? &*raw_data : nullptr);
    if (!t.ok()) return t.status().WithContext("initializer '" + name + "'");
    Value v;
    v.dtype = t->dtype();
    v.dtype_known = true;
    v.shape = t->shape();
    v.constant = std::make_shared<const Tensor>(std::move(t).value());
    MF_RETURN_IF_ERROR(define(name, std::move(v)).status());
  }
  if (gp.sparse_initializer_size() > 0) return Unimplemented("sparse initializers are not supported");
  for (const auto& in : gp.input()) {
    auto it = by_name.find(in.name());
    if (it != by_name.end()) continue;  // an initializer listed as input (IR < 4): a constant here
    Value v;
    MF_RETURN_IF_ERROR(ReadValueInfo(in, &v));
    if (!v.dtype_known) return InvalidArgument("graph input '" + in.name() + "' has no element type");
    MF_ASSIGN_OR_RETURN(int id, define(in.name(), std::move(v)));
    g.inputs.push_back(id);
  }

  // Create every node and its outputs first, then resolve inputs: the file's node order need
  // not be topological, so an input may be produced by a later node.
  std::vector<Node> nodes(static_cast<size_t>(gp.node_size()));
  for (int i = 0; i < gp.node_size(); ++i) {
    auto& np = *gp.mutable_node(i);
    Node& n = nodes[static_cast<size_t>(i)];
    n.op_type = np.op_type();
    n.name = np.name().empty() ? np.op_type() + "#" + std::to_string(i) : np.name();
    if (!np.domain().empty() && np.domain() != "ai.onnx") {
      return Unimplemented(Graph::Describe(n) + ": operator domain '" + np.domain() + "' is not supported");
    }
    for (auto& a : *np.mutable_attribute()) {
      auto attr = ConvertAttribute(a, model_dir);
      if (!attr.ok()) return attr.status().WithContext(Graph::Describe(n) + ": attribute '" + a.name() + "'");
      n.attributes.Set(a.name(), std::move(attr).value());
    }
    for (const auto& out : np.output()) {
      if (out.empty()) {
        n.outputs.push_back(kNoValue);
        continue;
      }
      auto id = define(out, Value{});
      if (!id.ok()) return id.status().WithContext(Graph::Describe(n));
      n.outputs.push_back(*id);
    }
  }
  std::vector<int> producer(g.values.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int o : nodes[i].outputs) {
      if (o != kNoValue) producer[static_cast<size_t>(o)] = static_cast<int>(i);
    }
  }
  for (int i = 0; i < gp.node_size(); ++i) {
    Node& n = nodes[static_cast<size_t>(i)];
    for (const auto& in : gp.node(i).input()) {
      if (in.empty()) {
        n.inputs.push_back(kNoValue);
        continue;
      }
      auto it = by_name.find(in);
      if (it == by_name.end()) {
        return InvalidArgument(Graph::Describe(n) + ": input '" + in +
                               "' is not a graph input, an initializer or any node's output");
      }
      n.inputs.push_back(it->second);
    }
  }

  // Kahn's algorithm: a stable topological order, or the name of a node on a cycle.
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<int>> consumers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int in : nodes[i].inputs) {
      if (in == kNoValue) continue;
      int p = producer[static_cast<size_t>(in)];
      if (p < 0) continue;
      if (p == static_cast<int>(i)) return InvalidArgument(Graph::Describe(nodes[i]) + ": consumes its own output");
      ++pending[i];
      consumers[static_cast<size_t>(p)].push_back(static_cast<int>(i));
    }
  }
  // Ready nodes lowest index first (a min-heap), so a file that is already sorted keeps its order.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<int> order;
  order.reserve(nodes.size());
  while (!ready.empty()) {
    int cur = ready.top();
    ready.pop();
    order.push_back(cur);
    for (int c : consumers[static_cast<size_t>(cur)]) {
      if (--pending[static_cast<size_t>(c)] == 0) ready.push(c);
    }
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (pending[i] > 0) return InvalidArgument(Graph::Describe(nodes[i]) + ": is part of a cycle");
    }
  }
  g.nodes.reserve(nodes.size());
  for (int i : order) g.nodes.push_back(std::move(nodes[static_cast<size_t>(i)]));

  for (const auto& out : gp.output()) {
    auto it = by_name.find(out.name());
    if (it == by_name.end()) {
      return InvalidArgument("graph output '" + out.name() + "' is not produced by any node");
    }
    Value declared;
    MF_RETURN_IF_ERROR(ReadValueInfo(out, &declared));
    Value& v = g.values[static_cast<size_t>(it->second)];
    if (!v.shape && declared.shape) v.shape = declared.shape;
    if (!v.dtype_known && declared.dtype_known) {
      v.dtype = declared.dtype;
      v.dtype_known = true;
    }
    g.outputs.push_back(it->second);
  }
  if (g.outputs.empty()) return InvalidArgument("the model declares no graph outputs");
  return g;
}

}  // namespace

StatusOr<Graph> LoadModelBytes(std::string_view bytes, const std::string& model_dir) {
  if (bytes.size() >= kMaxModelFileBytes) return ResourceExhausted("model is 2 GiB or larger; use external data");
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument("not a valid ONNX model (protobuf parse failed)");
  }
  return ConvertModel(model, model_dir);
}

StatusOr<Graph> LoadModelFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return NotFound("model file '" + path + "' does not exist");
  // Parsed straight from the file: holding the file's bytes too would double the weights'
  // memory while the model loads (what the server's swap peak is made of).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound("model file '" + path + "': " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return DataLoss("cannot stat model file '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return NotFound("model file '" + path + "' is not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size >= kMaxModelFileBytes) return ResourceExhausted("model file '" + path + "' is 2 GiB or larger");
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const ReadAt read_at = [fd](uint64_t offset, size_t n, char* out) { return ReadFileRange(fd, offset, n, out).ok(); };
  if (auto split = SplitRawData(size, read_at, kSplitRawDataMinBytes, MaxStructureBytes(size))) {
    onnx::ModelProto model;
    if (!model.ParseFromString(split->structure)) {
      return InvalidArgument(path + ": not a valid ONNX model (protobuf parse failed)");
    }
    split->structure = std::string();  // parsed: its memory goes before the weights arrive
    const RawDataLeftInFile in_file{fd, std::move(split->raw_data)};
    auto g = ConvertModel(model, dir, &in_file);
    if (!g.ok()) return g.status().WithContext(path);
    return g;
  }
  onnx::ModelProto model;
  {
    google::protobuf::io::FileInputStream stream(fd, kParseBlockBytes);
    // Bounded by the file's size: a field claiming more bytes than the file has is refused
    // before protobuf reserves room for it.
    if (!model.ParseFromBoundedZeroCopyStream(&stream, static_cast<int>(size))) {
      if (stream.GetErrno() != 0) {
        return DataLoss("cannot read model file '" + path + "': " + std::strerror(stream.GetErrno()));
      }
      return InvalidArgument(path + ": not a valid ONNX model (protobuf parse failed)");
    }
  }
  auto g = ConvertModel(model, dir);
  if (!g.ok()) return g.status().WithContext(path);
  return g;
}

}  // namespace mf::runtime
