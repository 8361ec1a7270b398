#include "runtime/graph/raw_data_split.h"

#include <algorithm>
#include <utility>

namespace mf::runtime {
namespace {

// Field numbers of onnx.proto (ModelProto.graph, GraphProto.initializer, TensorProto's).
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorRawData = 9;
constexpr uint32_t kTensorExternalData = 13;
constexpr uint32_t kTensorDataLocation = 14;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Sequential reads over ReadAt through a window, so that headers cost no call each and skipped
// payloads are never read.
class Cursor {
 public:
  Cursor(uint64_t size, const ReadAt& read) : size_(size), read_(read) {}

  uint64_t pos() const { return pos_; }

  bool Varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      char c;
      if (!Read(1, &c)) return false;
      const auto byte = static_cast<uint8_t>(c);
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return shift < 63 || byte <= 1;
    }
    return false;
  }

  // Appends the next `n` bytes to `out`.
  bool Append(uint64_t n, std::string* out, uint64_t cap) {
    if (n > size_ - pos_ || out->size() + n > cap) return false;
    const size_t at = out->size();
    out->resize(at + n);
    return Read(n, out->data() + at);
  }

  bool Skip(uint64_t n) {
    if (n > size_ - pos_) return false;
    pos_ += n;
    return true;
  }

 private:
  bool Read(uint64_t n, char* out) {
    if (n > size_ - pos_) return false;
    while (n > 0) {
      if (pos_ < window_at_ || pos_ >= window_at_ + window_.size()) {
        const size_t want = static_cast<size_t>(std::min<uint64_t>(kWindowBytes, size_ - pos_));
        window_.resize(want);
        if (!read_(pos_, want, window_.data())) return false;
        window_at_ = pos_;
      }
      const size_t in_window = static_cast<size_t>(window_at_ + window_.size() - pos_);
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, in_window));
      std::copy_n(window_.data() + (pos_ - window_at_), take, out);
      out += take;
      pos_ += take;
      n -= take;
    }
    return true;
  }

  static constexpr size_t kWindowBytes = 64 << 10;
  uint64_t size_;
  const ReadAt& read_;
  uint64_t pos_ = 0;
  uint64_t window_at_ = 0;
  std::string window_;
};

void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

class Splitter {
 public:
  Splitter(Cursor* in, uint64_t min_bytes, uint64_t cap) : in_(*in), min_bytes_(min_bytes), cap_(cap) {}

  // ModelProto fields up to `end`, with field 7 (graph) rewritten.
  bool Model(uint64_t end, std::string* out) {
    return Fields(end, out, [&](uint32_t field, uint64_t length, std::string* dst) -> std::optional<bool> {
      if (field != kModelGraph) return std::nullopt;
      std::string graph;
      return Graph(in_.pos() + length, &graph) && Put(field, graph, dst);
    });
  }

  std::unordered_map<int, ByteSpan> TakeSpans() { return std::move(spans_); }

 private:
  // Calls `rewrite(field, length, out)` for each length-delimited field: nullopt copies the field
  // as it is, else its result says whether the rewrite (which consumed the payload) worked. Every
  // other field is copied as it is. Groups (wire types 3, 4) and unknown wire types give false.
  template <class Rewrite>
  bool Fields(uint64_t end, std::string* out, Rewrite&& rewrite) {
    while (in_.pos() < end) {
      uint64_t tag = 0;
      if (!in_.Varint(&tag) || tag >> 3 == 0 || tag >> 3 > 0x1fffffff) return false;
      const auto field = static_cast<uint32_t>(tag >> 3);
      switch (static_cast<uint32_t>(tag & 7)) {
        case kVarint: {
          uint64_t v = 0;
          if (!in_.Varint(&v)) return false;
          saw_data_location_ = saw_data_location_ || field == kTensorDataLocation;
          PutVarint(tag, out);
          PutVarint(v, out);
          break;
        }
        case kFixed64:
          PutVarint(tag, out);
          if (!in_.Append(8, out, cap_)) return false;
          break;
        case kFixed32:
          PutVarint(tag, out);
          if (!in_.Append(4, out, cap_)) return false;
          break;
        case kLengthDelimited: {
          uint64_t length = 0;
          if (!in_.Varint(&length) || length > end - std::min(end, in_.pos())) return false;
          if (auto done = rewrite(field, length, out)) {
            if (!*done) return false;
            break;
          }
          PutVarint(tag, out);
          PutVarint(length, out);
          if (!in_.Append(length, out, cap_)) return false;
          break;
        }
        default:
          return false;
      }
      if (out->size() > cap_) return false;
    }
    return in_.pos() == end;
  }

  bool Graph(uint64_t end, std::string* out) {
    return Fields(end, out, [&](uint32_t field, uint64_t length, std::string* dst) -> std::optional<bool> {
      if (field != kGraphInitializer) return std::nullopt;
      std::string tensor;
      return Tensor(in_.pos() + length, &tensor) && Put(field, tensor, dst);
    });
  }

  // One initializer: only its last raw_data counts (protobuf keeps the last value of a field that
  // is not repeated), so every raw_data is taken out of the copy, and the last one is either
  // split (large) or put back at the end (small).
  bool Tensor(uint64_t end, std::string* out) {
    const int index = initializers_++;
    bool external = false, last_split = false;
    ByteSpan last;
    std::string last_small;  // the last raw_data's payload, when small
    bool any_raw = false;
    saw_data_location_ = false;
    const bool ok = Fields(end, out, [&](uint32_t field, uint64_t length, std::string*) -> std::optional<bool> {
      if (field == kTensorExternalData) external = true;
      if (field != kTensorRawData) return std::nullopt;
      any_raw = true;
      last_small.clear();
      last_split = length >= min_bytes_;
      if (!last_split) return in_.Append(length, &last_small, cap_);
      last = {in_.pos(), length};
      return in_.Skip(length);
    });
    if (!ok) return false;
    external = external || saw_data_location_;
    if (last_split && external) return false;  // leave the conflict to the loader's own checks
    if (last_split) {
      spans_[index] = last;
    } else if (any_raw) {
      return Put(kTensorRawData, last_small, out);
    }
    return true;
  }

  bool Put(uint32_t field, const std::string& payload, std::string* out) {
    PutVarint((uint64_t{field} << 3) | kLengthDelimited, out);
    PutVarint(payload.size(), out);
    out->append(payload);
    return out->size() <= cap_;
  }

  Cursor& in_;
  uint64_t min_bytes_;
  uint64_t cap_;
  int initializers_ = 0;
  bool saw_data_location_ = false;  // a varint field 14 since Tensor() reset it (tensors nest none)
  std::unordered_map<int, ByteSpan> spans_;
};

}  // namespace

std::optional<SplitModel> SplitRawData(uint64_t size, const ReadAt& read, uint64_t min_bytes,
                                       uint64_t max_structure_bytes) {
  Cursor cursor(size, read);
  Splitter splitter(&cursor, std::max<uint64_t>(min_bytes, 1), max_structure_bytes);
  SplitModel split;
  if (!splitter.Model(size, &split.structure)) return std::nullopt;
  split.raw_data = splitter.TakeSpans();
  if (split.raw_data.empty()) return std::nullopt;  // nothing to gain over parsing it whole
  return split;
}

}  // namespace mf::runtime
