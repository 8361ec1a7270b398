#include "tools/local/apiserver/cel/interpreter.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include <re2/re2.h>

namespace mf::local::cel {
namespace {

using K = Value::Kind;

Value NoOverload(const std::string& fn, const std::vector<Value>& args) {
  std::string types;
  for (const auto& a : args) types += (types.empty() ? "" : ", ") + a.TypeName();
  return Value::Error("no such overload: " + fn + "(" + types + ")");
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Compiled regular expressions, shared by every evaluation: rules are few and evaluated often.
std::shared_ptr<const re2::RE2> CompiledRegex(const std::string& pattern) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const re2::RE2>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(pattern);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 1024) cache.clear();  // bounded: patterns come from users
  re2::RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(8 << 20);
  auto re = std::make_shared<const re2::RE2>(pattern, options);
  cache.emplace(pattern, re);
  return re;
}

Value Arithmetic(const std::string& fn, const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return NoOverload(fn, {a, b});  // CEL never mixes int, uint and double
  const char op = fn[1];
  switch (a.kind()) {
    case K::kInt: {
      int64_t x = a.int_value(), y = b.int_value(), r = 0;
      switch (op) {
        case '+': if (__builtin_add_overflow(x, y, &r)) return Value::Error("integer overflow"); return Value::Int(r);
        case '-': if (__builtin_sub_overflow(x, y, &r)) return Value::Error("integer overflow"); return Value::Int(r);
        case '*': if (__builtin_mul_overflow(x, y, &r)) return Value::Error("integer overflow"); return Value::Int(r);
        case '/':
          if (y == 0) return Value::Error("division by zero");
          if (x == std::numeric_limits<int64_t>::min() && y == -1) return Value::Error("integer overflow");
          return Value::Int(x / y);
        case '%':
          if (y == 0) return Value::Error("modulus by zero");
          if (x == std::numeric_limits<int64_t>::min() && y == -1) return Value::Error("integer overflow");
          return Value::Int(x % y);
      }
      break;
    }
    case K::kUint: {
      uint64_t x = a.uint_value(), y = b.uint_value(), r = 0;
      switch (op) {
        case '+': if (__builtin_add_overflow(x, y, &r)) return Value::Error("unsigned integer overflow"); return Value::Uint(r);
        case '-': if (__builtin_sub_overflow(x, y, &r)) return Value::Error("unsigned integer overflow"); return Value::Uint(r);
        case '*': if (__builtin_mul_overflow(x, y, &r)) return Value::Error("unsigned integer overflow"); return Value::Uint(r);
        case '/': if (y == 0) return Value::Error("division by zero"); return Value::Uint(x / y);
        case '%': if (y == 0) return Value::Error("modulus by zero"); return Value::Uint(x % y);
      }
      break;
    }
    case K::kDouble: {
      double x = a.double_value(), y = b.double_value();
      switch (op) {
        case '+': return Value::Double(x + y);
        case '-': return Value::Double(x - y);
        case '*': return Value::Double(x * y);
        case '/': return Value::Double(x / y);  // IEEE 754: division by zero is +-Inf or NaN
      }
      break;
    }
    case K::kString:
      if (op == '+') return Value::String(a.text() + b.text());
      break;
    case K::kBytes:
      if (op == '+') return Value::Bytes(a.text() + b.text());
      break;
    case K::kList:
      if (op == '+') {
        Value::ListRep out = a.list();
        out.insert(out.end(), b.list().begin(), b.list().end());
        return Value::List(std::move(out));
      }
      break;
    default: break;
  }
  return NoOverload(fn, {a, b});
}

Value ToInt(const Value& v) {
  switch (v.kind()) {
    case K::kInt: return v;
    case K::kUint:
      if (v.uint_value() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Value::Error("integer overflow");
      return Value::Int(static_cast<int64_t>(v.uint_value()));
    case K::kDouble: {
      double d = v.double_value();
      // The open range (-2^63 - 1, 2^63) truncates into an int64.
      if (!std::isfinite(d) || d <= -9223372036854775809.0 || d >= 9223372036854775808.0) return Value::Error("integer overflow");
      return Value::Int(static_cast<int64_t>(d));
    }
    case K::kString: {
      int64_t out = 0;
      const char* b = v.text().data();
      const char* e = b + v.text().size();
      auto [p, ec] = std::from_chars(b, e, out);
      if (ec != std::errc() || p != e || b == e) return Value::Error("cannot convert string '" + v.text() + "' to int");
      return Value::Int(out);
    }
    default: return NoOverload("int", {v});
  }
}

Value ToUint(const Value& v) {
  switch (v.kind()) {
    case K::kUint: return v;
    case K::kInt:
      if (v.int_value() < 0) return Value::Error("unsigned integer overflow");
      return Value::Uint(static_cast<uint64_t>(v.int_value()));
    case K::kDouble: {
      double d = v.double_value();
      if (!std::isfinite(d) || d <= -1.0 || d >= 18446744073709551616.0) return Value::Error("unsigned integer overflow");
      return Value::Uint(static_cast<uint64_t>(d));
    }
    case K::kString: {
      uint64_t out = 0;
      const char* b = v.text().data();
      const char* e = b + v.text().size();
      auto [p, ec] = std::from_chars(b, e, out);
      if (ec != std::errc() || p != e || b == e) return Value::Error("cannot convert string '" + v.text() + "' to uint");
      return Value::Uint(out);
    }
    default: return NoOverload("uint", {v});
  }
}

Value ToDouble(const Value& v) {
  switch (v.kind()) {
    case K::kDouble: return v;
    case K::kInt: return Value::Double(static_cast<double>(v.int_value()));
    case K::kUint: return Value::Double(static_cast<double>(v.uint_value()));
    case K::kString: {
      const std::string& s = v.text();
      char* end = nullptr;
      double d = s.empty() ? 0 : std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size()) return Value::Error("cannot convert string '" + s + "' to double");
      return Value::Double(d);
    }
    default: return NoOverload("double", {v});
  }
}

Value ToStringValue(const Value& v) {
  switch (v.kind()) {
    case K::kString: return v;
    case K::kInt: return Value::String(std::to_string(v.int_value()));
    case K::kUint: return Value::String(std::to_string(v.uint_value()));
    case K::kBool: return Value::String(v.bool_value() ? "true" : "false");
    case K::kDouble: {
      char buf[64];
      auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v.double_value());
      if (ec != std::errc()) return Value::Error("cannot format double");
      return Value::String(std::string(buf, p));
    }
    case K::kBytes:
      if (!ValidUtf8(v.text())) return Value::Error("invalid UTF-8 in bytes, cannot convert to string");
      return Value::String(v.text());
    default: return NoOverload("string", {v});
  }
}

// Kubernetes list library: sum, min, max, isSorted, indexOf, lastIndexOf.
Value ListFunction(const std::string& fn, const std::vector<Value>& args) {
  const Value& list = args[0];
  const auto& items = list.list();
  if (fn == "sum") {
    if (items.empty()) return Value::Int(0);
    Value total = items[0];
    if (total.kind() != K::kInt && total.kind() != K::kUint && total.kind() != K::kDouble) return NoOverload("sum", {list});
    for (size_t i = 1; i < items.size(); ++i) {
      total = Arithmetic("_+_", total, items[i]);
      if (total.is_error()) return total;
    }
    return total;
  }
  if (fn == "min" || fn == "max") {
    if (items.empty()) return Value::Error(fn + " called on empty list");
    Value best = items[0];
    for (size_t i = 1; i < items.size(); ++i) {
      bool ok = false;
      int c = Compare(items[i], best, &ok);
      if (!ok || items[i].kind() != best.kind()) return NoOverload(fn, {list});
      if (fn == "min" ? c < 0 : c > 0) best = items[i];
    }
    if (items.size() == 1) {
      bool ok = false;
      Compare(best, best, &ok);
      if (!ok) return NoOverload(fn, {list});
    }
    return best;
  }
  if (fn == "isSorted") {
    for (size_t i = 1; i < items.size(); ++i) {
      bool ok = false;
      int c = Compare(items[i - 1], items[i], &ok);
      if (!ok || items[i].kind() != items[i - 1].kind()) return NoOverload(fn, {list});
      if (c > 0) return Value::Bool(false);
    }
    return Value::Bool(true);
  }
  // indexOf / lastIndexOf
  const int64_t n = static_cast<int64_t>(items.size());
  if (fn == "indexOf") {
    for (int64_t i = 0; i < n; ++i) {
      if (Equal(items[static_cast<size_t>(i)], args[1])) return Value::Int(i);
    }
  } else {
    for (int64_t i = n - 1; i >= 0; --i) {
      if (Equal(items[static_cast<size_t>(i)], args[1])) return Value::Int(i);
    }
  }
  return Value::Int(-1);
}

// Kubernetes strings library: indexOf / lastIndexOf in code points.
Value StringIndexOf(const std::string& fn, const std::string& s, const std::string& sub) {
  size_t at = fn == "indexOf" ? s.find(sub) : s.rfind(sub);
  if (at == std::string::npos) return Value::Int(-1);
  return Value::Int(static_cast<int64_t>(CodePoints(s.substr(0, at))));
}

// Byte offsets of each code point of `s`, plus s.size() at the end.
std::vector<size_t> CodePointOffsets(const std::string& s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  }
  out.push_back(s.size());
  return out;
}

bool AsInt(const Value& v, int64_t* out) {
  if (v.kind() != K::kInt) return false;
  *out = v.int_value();
  return true;
}

// Kubernetes strings library (k8s.io/apiserver/pkg/cel/library, cel-go ext.Strings):
// charAt, lowerAscii, upperAscii, replace, split, substring, trim, and join on lists.
Value StringFunction(const std::string& fn, const std::vector<Value>& args) {
  const std::string& s = args[0].text();
  if (fn == "lowerAscii" || fn == "upperAscii") {
    std::string out = s;
    for (char& c : out) {
      if (fn == "lowerAscii" && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (fn == "upperAscii" && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    return Value::String(std::move(out));
  }
  if (fn == "trim") {
    const char* ws = " \t\n\v\f\r";
    size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) return Value::String("");
    return Value::String(s.substr(b, s.find_last_not_of(ws) - b + 1));
  }
  if (fn == "charAt" || fn == "substring") {
    const std::vector<size_t> cps = CodePointOffsets(s);
    const int64_t n = static_cast<int64_t>(cps.size()) - 1;
    int64_t start = 0, end = 0;
    if (!AsInt(args[1], &start)) return NoOverload(fn, args);
    if (fn == "charAt") {
      if (start < 0 || start > n) return Value::Error("index out of range: " + std::to_string(start));
      if (start == n) return Value::String("");
      return Value::String(s.substr(cps[static_cast<size_t>(start)], cps[static_cast<size_t>(start) + 1] - cps[static_cast<size_t>(start)]));
    }
    end = n;
    if (args.size() == 3 && !AsInt(args[2], &end)) return NoOverload(fn, args);
    if (start < 0 || start > n) return Value::Error("index out of range: " + std::to_string(start));
    if (end < 0 || end > n) return Value::Error("index out of range: " + std::to_string(end));
    if (start > end) return Value::Error("invalid substring range. start: " + std::to_string(start) + ", end: " + std::to_string(end));
    return Value::String(s.substr(cps[static_cast<size_t>(start)], cps[static_cast<size_t>(end)] - cps[static_cast<size_t>(start)]));
  }
  if (fn == "replace") {
    if (args[1].kind() != K::kString || args[2].kind() != K::kString) return NoOverload(fn, args);
    int64_t limit = -1;
    if (args.size() == 4 && !AsInt(args[3], &limit)) return NoOverload(fn, args);
    const std::string& from = args[1].text();
    const std::string& to = args[2].text();
    if (from.empty()) {
      // Go's strings.Replace with an empty old string inserts `to` around every code point.
      const std::vector<size_t> cps = CodePointOffsets(s);
      std::string out;
      int64_t done = 0;
      for (size_t i = 0; i < cps.size(); ++i) {
        if (limit < 0 || done < limit) out += to, ++done;
        if (i + 1 < cps.size()) out += s.substr(cps[i], cps[i + 1] - cps[i]);
      }
      return Value::String(std::move(out));
    }
    std::string out;
    size_t pos = 0;
    int64_t done = 0;
    while (limit < 0 || done < limit) {
      size_t at = s.find(from, pos);
      if (at == std::string::npos) break;
      out += s.substr(pos, at - pos) + to;
      pos = at + from.size();
      ++done;
    }
    out += s.substr(pos);
    return Value::String(std::move(out));
  }
  if (fn == "split") {
    if (args[1].kind() != K::kString) return NoOverload(fn, args);
    int64_t limit = -1;
    if (args.size() == 3 && !AsInt(args[2], &limit)) return NoOverload(fn, args);
    const std::string& sep = args[1].text();
    Value::ListRep out;
    if (limit == 0) return Value::List(std::move(out));
    if (sep.empty()) {  // one element per code point, the last holding the rest
      const std::vector<size_t> cps = CodePointOffsets(s);
      for (size_t i = 0; i + 1 < cps.size(); ++i) {
        if (limit > 0 && static_cast<int64_t>(out.size()) == limit - 1) {
          out.push_back(Value::String(s.substr(cps[i])));
          break;
        }
        out.push_back(Value::String(s.substr(cps[i], cps[i + 1] - cps[i])));
      }
      return Value::List(std::move(out));
    }
    size_t pos = 0;
    while (limit < 0 || static_cast<int64_t>(out.size()) < limit - 1) {
      size_t at = s.find(sep, pos);
      if (at == std::string::npos) break;
      out.push_back(Value::String(s.substr(pos, at - pos)));
      pos = at + sep.size();
    }
    out.push_back(Value::String(s.substr(pos)));
    return Value::List(std::move(out));
  }
  return Value::Error("no such function: " + fn);
}

Value Join(const std::vector<Value>& args) {
  std::string sep = args.size() == 2 && args[1].kind() == K::kString ? args[1].text() : "";
  if (args.size() == 2 && args[1].kind() != K::kString) return NoOverload("join", args);
  std::string out;
  bool first = true;
  for (const auto& item : args[0].list()) {
    if (item.kind() != K::kString) return NoOverload("join", args);
    if (!first) out += sep;
    out += item.text();
    first = false;
  }
  return Value::String(std::move(out));
}

// Kubernetes escapes property names that are not CEL identifiers: "__dash__" is '-', "__dot__"
// '.', "__slash__" '/', "__underscores__" '__', and "__in__" etc. a reserved word. Only names
// containing "__" can be escaped.
std::string UnescapeFieldName(const std::string& name) {
  if (name.find("__") == std::string::npos) return name;
  static const std::set<std::string> kReserved = {"as", "break", "const", "continue", "else", "false", "for", "function", "if",
                                                  "import", "in", "let", "loop", "package", "namespace", "null", "return", "true",
                                                  "var", "void", "while"};
  if (name.size() > 4 && name.compare(0, 2, "__") == 0 && name.compare(name.size() - 2, 2, "__") == 0 &&
      kReserved.count(name.substr(2, name.size() - 4))) {
    return name.substr(2, name.size() - 4);
  }
  static const std::pair<const char*, const char*> kEscapes[] = {
      {"__underscores__", "__"}, {"__dot__", "."}, {"__dash__", "-"}, {"__slash__", "/"}};
  std::string out;
  size_t i = 0;
  while (i < name.size()) {
    bool replaced = false;
    for (const auto& [from, to] : kEscapes) {
      if (name.compare(i, std::char_traits<char>::length(from), from) == 0) {
        out += to;
        i += std::char_traits<char>::length(from);
        replaced = true;
        break;
      }
    }
    if (!replaced) out.push_back(name[i++]);
  }
  return out;
}

// Field selection on a map: the name as written, else its Kubernetes-unescaped form.
const Value* SelectField(const Value& target, const std::string& name) {
  if (const Value* v = target.Find(Value::String(name))) return v;
  const std::string unescaped = UnescapeFieldName(name);
  return unescaped == name ? nullptr : target.Find(Value::String(unescaped));
}

Value Index(const Value& target, const Value& index) {
  if (target.kind() == K::kList) {
    int64_t i = 0;
    if (index.kind() == K::kInt) {
      i = index.int_value();
    } else if (index.kind() == K::kUint) {
      if (index.uint_value() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Value::Error("index out of bounds");
      i = static_cast<int64_t>(index.uint_value());
    } else if (index.kind() == K::kDouble && std::isfinite(index.double_value()) &&
               index.double_value() == std::trunc(index.double_value()) && std::abs(index.double_value()) < 9e18) {
      i = static_cast<int64_t>(index.double_value());
    } else {
      return NoOverload("_[_]", {target, index});
    }
    if (i < 0 || static_cast<uint64_t>(i) >= target.list().size()) return Value::Error("index out of bounds: " + std::to_string(i));
    return target.list()[static_cast<size_t>(i)];
  }
  if (target.kind() == K::kMap) {
    if (const Value* v = target.Find(index)) return *v;
    return Value::Error("no such key: " + (index.kind() == K::kString ? index.text() : index.TypeName()));
  }
  return NoOverload("_[_]", {target, index});
}

class Interpreter {
 public:
  Interpreter(std::vector<Binding>& vars, CostTracker* cost) : vars_(vars), cost_(cost) {}

  Value Eval(const Expr& e) {
    if (!cost_->Add(1)) return Exceeded();
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.literal;
      case Expr::Kind::kIdent: {
        for (auto it = vars_.rbegin(); it != vars_.rend(); ++it) {
          if (it->name == e.name) return it->value;
        }
        if (IsTypeName(e.name)) return Value::Type(e.name);
        return Value::Error("undeclared reference to '" + e.name + "'");
      }
      case Expr::Kind::kSelect: {
        Value target = Eval(*e.args[0]);
        if (target.is_error()) return target;
        if (target.kind() != K::kMap) return Value::Error("type '" + target.TypeName() + "' does not support field selection");
        if (const Value* v = SelectField(target, e.name)) return *v;
        return Value::Error("no such key: " + e.name);
      }
      case Expr::Kind::kHas: {
        Value target = Eval(*e.args[0]);
        if (target.is_error()) return target;
        if (target.kind() != K::kMap) return Value::Error("invalid type for field selection: " + target.TypeName());
        return Value::Bool(SelectField(target, e.name) != nullptr);
      }
      case Expr::Kind::kAnd:
      case Expr::Kind::kOr: return Logical(e);
      case Expr::Kind::kConditional: {
        Value cond = Eval(*e.args[0]);
        if (cond.is_error()) return cond;
        if (cond.kind() != K::kBool) return NoOverload("_?_:_", {cond});
        return Eval(*e.args[cond.bool_value() ? 1 : 2]);
      }
      case Expr::Kind::kList: {
        Value::ListRep items;
        items.reserve(e.args.size());
        for (const auto& a : e.args) {
          Value v = Eval(*a);
          if (v.is_error()) return v;
          items.push_back(std::move(v));
        }
        return Value::List(std::move(items));
      }
      case Expr::Kind::kMap: {
        Value::MapRep entries;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = Eval(*e.args[i]);
          if (k.is_error()) return k;
          Value v = Eval(*e.args[i + 1]);
          if (v.is_error()) return v;
          if (k.kind() != K::kString && k.kind() != K::kInt && k.kind() != K::kUint && k.kind() != K::kBool) {
            return Value::Error("unsupported key type: " + k.TypeName());
          }
          if (!cost_->Add(entries.size() / 8)) return Exceeded();  // the duplicate check is linear
          for (const auto& [existing, _] : entries) {
            if (Equal(existing, k)) return Value::Error("Failed with repeated key");
          }
          entries.emplace_back(std::move(k), std::move(v));
        }
        return Value::Map(std::move(entries));
      }
      case Expr::Kind::kComprehension: return Comprehension(e);
      case Expr::Kind::kCall: return Call(e);
    }
    return Value::Error("unknown expression");
  }

 private:
  Value Exceeded() { return Value::Error("operation cancelled: actual cost limit exceeded"); }

  // CEL's commutative && and ||: false (resp. true) on either side decides, even when the other
  // side is an error; otherwise the first error wins.
  Value Logical(const Expr& e) {
    const bool is_and = e.kind == Expr::Kind::kAnd;
    Value left = Eval(*e.args[0]);
    if (cost_->exceeded()) return left;
    if (left.kind() == K::kBool && left.bool_value() != is_and) return left;
    Value right = Eval(*e.args[1]);
    if (cost_->exceeded()) return right;
    if (right.kind() == K::kBool && right.bool_value() != is_and) return right;
    if (left.is_error()) return left;
    if (right.is_error()) return right;
    if (left.kind() != K::kBool || right.kind() != K::kBool) return NoOverload(is_and ? "_&&_" : "_||_", {left, right});
    return Value::Bool(is_and);
  }

  Value Comprehension(const Expr& e) {
    Value range = Eval(*e.args[0]);
    if (range.is_error()) return range;
    std::vector<Value> elements;
    if (range.kind() == K::kList) {
      elements = range.list();
    } else if (range.kind() == K::kMap) {
      for (const auto& [k, _] : range.map()) elements.push_back(k);
    } else {
      return Value::Error("expression of type '" + range.TypeName() + "' cannot be range of a comprehension");
    }
    const std::string& macro = e.name;
    vars_.push_back({e.var, Value()});
    struct Pop {
      std::vector<Binding>& v;
      ~Pop() { v.pop_back(); }
    } pop{vars_};
    Value first_error;
    bool have_error = false;
    int64_t matches = 0;
    Value::ListRep out;
    for (const Value& element : elements) {
      if (!cost_->Add(1)) return Exceeded();
      vars_.back().value = element;
      Value r = Eval(*e.args[1]);
      if (cost_->exceeded()) return r;
      if (macro == "map") {
        if (e.args.size() == 3) {  // map(x, filter, transform)
          if (r.is_error()) return r;
          if (r.kind() != K::kBool) return NoOverload("map", {r});
          if (!r.bool_value()) continue;
          r = Eval(*e.args[2]);
          if (cost_->exceeded()) return r;
        }
        if (r.is_error()) return r;
        out.push_back(std::move(r));
        continue;
      }
      if (r.is_error()) {
        if (macro == "filter" || macro == "exists_one") return r;
        if (!have_error) first_error = r, have_error = true;
        continue;
      }
      if (r.kind() != K::kBool) return NoOverload(macro, {r});
      const bool b = r.bool_value();
      if (macro == "all" && !b) return Value::Bool(false);
      if (macro == "exists" && b) return Value::Bool(true);
      if (macro == "exists_one" && b) ++matches;
      if (macro == "filter" && b) out.push_back(element);
    }
    if (macro == "map" || macro == "filter") return Value::List(std::move(out));
    if (macro == "exists_one") return Value::Bool(matches == 1);
    if (have_error) return first_error;  // all / exists: no decisive element, so the error stands
    return Value::Bool(macro == "all");
  }

  Value Call(const Expr& e) {
    std::vector<Value> args;
    args.reserve(e.args.size());
    for (const auto& a : e.args) {
      Value v = Eval(*a);
      if (v.is_error()) return v;  // every function is strict in its arguments
      args.push_back(std::move(v));
    }
    const std::string& fn = e.name;
    if (fn == "_==_") return Value::Bool(Equal(args[0], args[1]));
    if (fn == "_!=_") return Value::Bool(!Equal(args[0], args[1]));
    if (fn == "_<_" || fn == "_<=_" || fn == "_>_" || fn == "_>=_") {
      bool ok = false;
      int c = Compare(args[0], args[1], &ok);
      if (!ok) return NoOverload(fn, args);
      if (fn == "_<_") return Value::Bool(c < 0);
      if (fn == "_<=_") return Value::Bool(c <= 0);
      if (fn == "_>_") return Value::Bool(c > 0);
      return Value::Bool(c >= 0);
    }
    if (fn == "_+_" || fn == "_-_" || fn == "_*_" || fn == "_/_" || fn == "_%_") {
      if (fn == "_+_" && (args[0].kind() == K::kString || args[0].kind() == K::kBytes)) {
        if (!cost_->Add((args[0].text().size() + args[1].text().size()) / 10)) return Exceeded();
      }
      if (fn == "_+_" && args[0].kind() == K::kList && !cost_->Add(args[0].list().size() + args[1].list().size())) return Exceeded();
      return Arithmetic(fn, args[0], args[1]);
    }
    if (fn == "!_") {
      if (args[0].kind() != K::kBool) return NoOverload(fn, args);
      return Value::Bool(!args[0].bool_value());
    }
    if (fn == "-_") {
      if (args[0].kind() == K::kInt) {
        if (args[0].int_value() == std::numeric_limits<int64_t>::min()) return Value::Error("integer overflow");
        return Value::Int(-args[0].int_value());
      }
      if (args[0].kind() == K::kDouble) return Value::Double(-args[0].double_value());
      return NoOverload(fn, args);
    }
    if (fn == "_[_]") return Index(args[0], args[1]);
    if (fn == "@in") {
      if (args[1].kind() == K::kList) {
        if (!cost_->Add(args[1].list().size())) return Exceeded();
        for (const auto& item : args[1].list()) {
          if (Equal(item, args[0])) return Value::Bool(true);
        }
        return Value::Bool(false);
      }
      if (args[1].kind() == K::kMap) return Value::Bool(args[1].Find(args[0]) != nullptr);
      return NoOverload(fn, args);
    }
    if (fn == "size") {
      const Value& v = args[0];
      if (v.kind() == K::kString) return Value::Int(static_cast<int64_t>(CodePoints(v.text())));
      if (v.kind() == K::kBytes) return Value::Int(static_cast<int64_t>(v.text().size()));
      if (v.kind() == K::kList) return Value::Int(static_cast<int64_t>(v.list().size()));
      if (v.kind() == K::kMap) return Value::Int(static_cast<int64_t>(v.map().size()));
      return NoOverload(fn, args);
    }
    if (fn == "startsWith" || fn == "endsWith" || fn == "contains" || fn == "matches") {
      if (args[0].kind() != K::kString || args[1].kind() != K::kString) return NoOverload(fn, args);
      const std::string& s = args[0].text();
      const std::string& p = args[1].text();
      if (!cost_->Add((s.size() + p.size()) / 10 + (fn == "matches" ? s.size() : 0))) return Exceeded();
      if (fn == "startsWith") return Value::Bool(s.compare(0, p.size(), p) == 0 && s.size() >= p.size());
      if (fn == "endsWith") return Value::Bool(s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0);
      if (fn == "contains") return Value::Bool(s.find(p) != std::string::npos);
      auto re = CompiledRegex(p);
      if (!re->ok()) return Value::Error("invalid regular expression '" + p + "': " + re->error());
      return Value::Bool(re2::RE2::PartialMatch(s, *re));
    }
    if (fn == "int") return ToInt(args[0]);
    if (fn == "uint") return ToUint(args[0]);
    if (fn == "double") return ToDouble(args[0]);
    if (fn == "string") return ToStringValue(args[0]);
    if (fn == "bool") {
      if (args[0].kind() == K::kBool) return args[0];
      if (args[0].kind() == K::kString) {
        static const std::set<std::string> kTrue = {"1", "t", "true", "TRUE", "True"};
        static const std::set<std::string> kFalse = {"0", "f", "false", "FALSE", "False"};
        if (kTrue.count(args[0].text())) return Value::Bool(true);
        if (kFalse.count(args[0].text())) return Value::Bool(false);
        return Value::Error("cannot convert string '" + args[0].text() + "' to bool");
      }
      return NoOverload(fn, args);
    }
    if (fn == "dyn") return args[0];
    if (fn == "type") return args[0].kind() == K::kType ? Value::Type("type") : Value::Type(args[0].TypeName());
    if (fn == "sum" || fn == "min" || fn == "max" || fn == "isSorted" || fn == "indexOf" || fn == "lastIndexOf") {
      if (args[0].kind() == K::kList) {
        if (!cost_->Add(args[0].list().size())) return Exceeded();
        return ListFunction(fn, args);
      }
      if (args[0].kind() == K::kString && args.size() == 2 && args[1].kind() == K::kString &&
          (fn == "indexOf" || fn == "lastIndexOf")) {
        if (!cost_->Add(args[0].text().size() / 10)) return Exceeded();
        return StringIndexOf(fn, args[0].text(), args[1].text());
      }
      return NoOverload(fn, args);
    }
    if (fn == "lowerAscii" || fn == "upperAscii" || fn == "trim" || fn == "charAt" || fn == "substring" || fn == "replace" ||
        fn == "split") {
      if (args[0].kind() != K::kString) return NoOverload(fn, args);
      size_t touched = args[0].text().size();
      for (size_t i = 1; i < args.size(); ++i) touched += args[i].kind() == K::kString ? args[i].text().size() : 0;
      uint64_t units = touched / 10 + (fn == "replace" || fn == "split" ? args[0].text().size() : 0);
      if (fn == "replace" && args[1].kind() == K::kString && args[2].kind() == K::kString) {
        // replace() can multiply the text: charge the largest result before building it.
        const uint64_t n = args[0].text().size();
        const uint64_t matches = args[1].text().empty() ? n + 1 : n / args[1].text().size();
        units += (n + matches * args[2].text().size()) / 10;
      }
      if (!cost_->Add(units)) return Exceeded();
      return StringFunction(fn, args);
    }
    if (fn == "join") {
      if (args[0].kind() != K::kList) return NoOverload(fn, args);
      size_t touched = 0;
      for (const auto& item : args[0].list()) touched += item.kind() == K::kString ? item.text().size() + 1 : 1;
      if (args.size() == 2 && args[1].kind() == K::kString) touched += args[1].text().size() * args[0].list().size();
      if (!cost_->Add(touched / 10 + args[0].list().size())) return Exceeded();
      return Join(args);
    }
    return Value::Error("no such function: " + fn);
  }

  std::vector<Binding>& vars_;
  CostTracker* cost_;
};

}  // namespace

bool IsSupportedFunction(const std::string& name, bool receiver_style, size_t arg_count) {
  // arg_count includes the receiver.
  struct Signature {
    bool global;
    bool receiver;
    size_t args;
  };
  static const std::map<std::string, std::vector<Signature>> kFunctions = {
      {"_==_", {{true, false, 2}}}, {"_!=_", {{true, false, 2}}}, {"_<_", {{true, false, 2}}},
      {"_<=_", {{true, false, 2}}}, {"_>_", {{true, false, 2}}},  {"_>=_", {{true, false, 2}}},
      {"_+_", {{true, false, 2}}},  {"_-_", {{true, false, 2}}},  {"_*_", {{true, false, 2}}},
      {"_/_", {{true, false, 2}}},  {"_%_", {{true, false, 2}}},  {"!_", {{true, false, 1}}},
      {"-_", {{true, false, 1}}},   {"_[_]", {{true, false, 2}}}, {"@in", {{true, false, 2}}},
      {"size", {{true, true, 1}}},
      {"startsWith", {{false, true, 2}}}, {"endsWith", {{false, true, 2}}}, {"contains", {{false, true, 2}}},
      {"matches", {{true, true, 2}}},
      {"int", {{true, false, 1}}}, {"uint", {{true, false, 1}}}, {"double", {{true, false, 1}}},
      {"string", {{true, false, 1}}}, {"bool", {{true, false, 1}}}, {"dyn", {{true, false, 1}}},
      {"type", {{true, false, 1}}},
      {"sum", {{false, true, 1}}}, {"min", {{false, true, 1}}}, {"max", {{false, true, 1}}},
      {"isSorted", {{false, true, 1}}}, {"indexOf", {{false, true, 2}}}, {"lastIndexOf", {{false, true, 2}}},
      {"lowerAscii", {{false, true, 1}}}, {"upperAscii", {{false, true, 1}}}, {"trim", {{false, true, 1}}},
      {"charAt", {{false, true, 2}}}, {"substring", {{false, true, 2}, {false, true, 3}}},
      {"replace", {{false, true, 3}, {false, true, 4}}}, {"split", {{false, true, 2}, {false, true, 3}}},
      {"join", {{false, true, 1}, {false, true, 2}}},
  };
  auto it = kFunctions.find(name);
  if (it == kFunctions.end()) return false;
  for (const auto& s : it->second) {
    if (s.args == arg_count && (receiver_style ? s.receiver : s.global)) return true;
  }
  return false;
}

bool IsTypeName(const std::string& name) {
  static const std::set<std::string> kTypes = {"int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type"};
  return kTypes.count(name) > 0;
}

Value Evaluate(const Expr& expr, std::vector<Binding>& vars, CostTracker* cost) {
  return Interpreter(vars, cost).Eval(expr);
}

}  // namespace mf::local::cel
