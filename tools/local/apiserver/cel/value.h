// The values a CEL expression computes with: CEL's null, bool, int, uint, double, string,
// bytes, list, map and type values, plus an error value. Errors are values (not exceptions)
// because CEL's && and || absorb an error when the other side decides the result.
// Lists and maps share their elements (copying a value is cheap; values are immutable).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mf::local::cel {

class Value {
 public:
  enum class Kind { kNull, kBool, kInt, kUint, kDouble, kString, kBytes, kList, kMap, kType, kError };
  using ListRep = std::vector<Value>;
  // Insertion-ordered; keys are unique (CEL forbids duplicate keys in a literal).
  using MapRep = std::vector<std::pair<Value, Value>>;

  Value() = default;  // null
  static Value Bool(bool v);
  static Value Int(int64_t v);
  static Value Uint(uint64_t v);
  static Value Double(double v);
  static Value String(std::string v);
  static Value Bytes(std::string v);
  static Value List(ListRep items);
  static Value Map(MapRep entries);
  static Value Type(std::string name);
  static Value Error(std::string message);

  Kind kind() const { return kind_; }
  bool is_error() const { return kind_ == Kind::kError; }
  bool bool_value() const { return b_; }
  int64_t int_value() const { return i_; }
  uint64_t uint_value() const { return u_; }
  double double_value() const { return d_; }
  // The text of a string, bytes, type name or error message.
  const std::string& text() const { return s_; }
  const ListRep& list() const;
  const MapRep& map() const;

  // CEL's type name: "int", "string", "list", "map", "null_type", ...
  std::string TypeName() const;
  // Map lookup by key with CEL's numeric key equivalence; null when absent.
  const Value* Find(const Value& key) const;

 private:
  Kind kind_ = Kind::kNull;
  bool b_ = false;
  int64_t i_ = 0;
  uint64_t u_ = 0;
  double d_ = 0;
  std::string s_;
  std::shared_ptr<const ListRep> list_;
  std::shared_ptr<const MapRep> map_;
};

// CEL equality: deep for lists and maps, heterogeneous for numbers as the CEL runtime defines it
// (1 == 1u == 1.0), false across other kinds. Neither side may be an error.
bool Equal(const Value& a, const Value& b);
// Ordering for <, <=, >, >=: -1, 0 or 1; *ok = false when the kinds have no order (a list, a
// map, a string against a number, NaN).
int Compare(const Value& a, const Value& b, bool* ok);

std::string KindName(Value::Kind kind);

}  // namespace mf::local::cel
