#include "tools/local/apiserver/cel/value.h"

#include <cmath>

namespace mf::local::cel {

Value Value::Bool(bool v) {
  Value out;
  out.kind_ = Kind::kBool;
  out.b_ = v;
  return out;
}
Value Value::Int(int64_t v) {
  Value out;
  out.kind_ = Kind::kInt;
  out.i_ = v;
  return out;
}
Value Value::Uint(uint64_t v) {
  Value out;
  out.kind_ = Kind::kUint;
  out.u_ = v;
  return out;
}
Value Value::Double(double v) {
  Value out;
  out.kind_ = Kind::kDouble;
  out.d_ = v;
  return out;
}
Value Value::String(std::string v) {
  Value out;
  out.kind_ = Kind::kString;
  out.s_ = std::move(v);
  return out;
}
Value Value::Bytes(std::string v) {
  Value out;
  out.kind_ = Kind::kBytes;
  out.s_ = std::move(v);
  return out;
}
Value Value::List(ListRep items) {
  Value out;
  out.kind_ = Kind::kList;
  out.list_ = std::make_shared<const ListRep>(std::move(items));
  return out;
}
Value Value::Map(MapRep entries) {
  Value out;
  out.kind_ = Kind::kMap;
  out.map_ = std::make_shared<const MapRep>(std::move(entries));
  return out;
}
Value Value::Type(std::string name) {
  Value out;
  out.kind_ = Kind::kType;
  out.s_ = std::move(name);
  return out;
}
Value Value::Error(std::string message) {
  Value out;
  out.kind_ = Kind::kError;
  out.s_ = std::move(message);
  return out;
}

const Value::ListRep& Value::list() const {
  static const ListRep kEmpty;
  return list_ ? *list_ : kEmpty;
}

const Value::MapRep& Value::map() const {
  static const MapRep kEmpty;
  return map_ ? *map_ : kEmpty;
}

std::string KindName(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kNull: return "null_type";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kUint: return "uint";
    case Value::Kind::kDouble: return "double";
    case Value::Kind::kString: return "string";
    case Value::Kind::kBytes: return "bytes";
    case Value::Kind::kList: return "list";
    case Value::Kind::kMap: return "map";
    case Value::Kind::kType: return "type";
    case Value::Kind::kError: return "error";
  }
  return "unknown";
}

std::string Value::TypeName() const { return KindName(kind_); }

const Value* Value::Find(const Value& key) const {
  for (const auto& [k, v] : map()) {
    if (Equal(k, key)) return &v;
  }
  return nullptr;
}

namespace {

bool IsNumber(const Value& v) {
  return v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kUint || v.kind() == Value::Kind::kDouble;
}

// Exact comparison of two numbers of any CEL numeric kinds; *ok = false for NaN.
int CompareNumbers(const Value& a, const Value& b, bool* ok) {
  using K = Value::Kind;
  *ok = true;
  if (a.kind() == K::kDouble || b.kind() == K::kDouble) {
    // An int64/uint64 converts to the nearest double; that is how the CEL runtime compares too.
    auto as_double = [](const Value& v) {
      if (v.kind() == K::kInt) return static_cast<double>(v.int_value());
      if (v.kind() == K::kUint) return static_cast<double>(v.uint_value());
      return v.double_value();
    };
    double x = as_double(a), y = as_double(b);
    if (std::isnan(x) || std::isnan(y)) {
      *ok = false;
      return 0;
    }
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.kind() == K::kInt && b.kind() == K::kInt) return a.int_value() < b.int_value() ? -1 : (a.int_value() > b.int_value() ? 1 : 0);
  if (a.kind() == K::kUint && b.kind() == K::kUint) return a.uint_value() < b.uint_value() ? -1 : (a.uint_value() > b.uint_value() ? 1 : 0);
  if (a.kind() == K::kInt) {  // int vs uint
    if (a.int_value() < 0) return -1;
    uint64_t x = static_cast<uint64_t>(a.int_value());
    return x < b.uint_value() ? -1 : (x > b.uint_value() ? 1 : 0);
  }
  if (b.int_value() < 0) return 1;  // uint vs int
  uint64_t y = static_cast<uint64_t>(b.int_value());
  return a.uint_value() < y ? -1 : (a.uint_value() > y ? 1 : 0);
}

}  // namespace

bool Equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (IsNumber(a) && IsNumber(b)) {
    bool ok = false;
    int c = CompareNumbers(a, b, &ok);
    return ok && c == 0;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kNull: return true;
    case K::kBool: return a.bool_value() == b.bool_value();
    case K::kString:
    case K::kBytes:
    case K::kType: return a.text() == b.text();
    case K::kList: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!Equal(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case K::kMap: {
      if (a.map().size() != b.map().size()) return false;
      for (const auto& [k, v] : a.map()) {
        const Value* other = b.Find(k);
        if (!other || !Equal(v, *other)) return false;
      }
      return true;
    }
    default: return false;
  }
}

int Compare(const Value& a, const Value& b, bool* ok) {
  using K = Value::Kind;
  if (IsNumber(a) && IsNumber(b)) return CompareNumbers(a, b, ok);
  *ok = a.kind() == b.kind() && (a.kind() == K::kString || a.kind() == K::kBytes || a.kind() == K::kBool);
  if (!*ok) return 0;
  if (a.kind() == K::kBool) return a.bool_value() == b.bool_value() ? 0 : (a.bool_value() ? 1 : -1);
  int c = a.text().compare(b.text());
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

}  // namespace mf::local::cel
