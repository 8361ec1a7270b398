#include "tools/local/apiserver/cel/json_value.h"

#include <cmath>

namespace mf::local::cel {

using json = nlohmann::json;

namespace {

const json* Child(const json* schema, const char* key) {
  if (!schema || !schema->is_object()) return nullptr;
  auto it = schema->find(key);
  return it == schema->end() ? nullptr : &*it;
}

std::string SchemaType(const json* schema) {
  const json* type = Child(schema, "type");
  return type && type->is_string() ? type->get<std::string>() : "";
}

Value Convert(const json& value, const json* schema, bool root, int depth);

}  // namespace

Value FromJson(const json& value, const json* schema, bool root) { return Convert(value, schema, root, 0); }

namespace {

Value Convert(const json& value, const json* schema, bool root, int depth) {
  if (depth > kMaxJsonDepth) return Value::Error("value nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  switch (value.type()) {
    case json::value_t::null: return Value();
    case json::value_t::boolean: return Value::Bool(value.get<bool>());
    case json::value_t::string: return Value::String(value.get<std::string>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: {
      if (SchemaType(schema) == "number") return Value::Double(value.get<double>());
      if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return Value::Double(value.get<double>());  // beyond int64: CEL ints cannot hold it
      }
      return Value::Int(value.get<int64_t>());
    }
    case json::value_t::number_float: {
      double d = value.get<double>();
      // "integer" fields written as 3.0 are integers to kube-apiserver.
      if (SchemaType(schema) == "integer" && std::isfinite(d) && d == std::trunc(d) && std::abs(d) < 9.2e18) {
        return Value::Int(static_cast<int64_t>(d));
      }
      return Value::Double(d);
    }
    case json::value_t::array: {
      const json* items = Child(schema, "items");
      Value::ListRep out;
      out.reserve(value.size());
      for (const auto& item : value) out.push_back(Convert(item, items, false, depth + 1));
      return Value::List(std::move(out));
    }
    case json::value_t::object: {
      const json* properties = Child(schema, "properties");
      const json* additional = Child(schema, "additionalProperties");
      Value::MapRep out;
      out.reserve(value.size());
      for (const auto& [key, child] : value.items()) {
        if (root && key == "metadata") {
          Value::MapRep meta;
          for (const char* field : {"name", "generateName"}) {
            if (child.is_object() && child.contains(field)) meta.emplace_back(Value::String(field), Convert(child[field], nullptr, false, depth + 2));
          }
          out.emplace_back(Value::String(key), Value::Map(std::move(meta)));
          continue;
        }
        const json* child_schema = nullptr;
        if (properties && properties->is_object() && properties->contains(key)) child_schema = &(*properties)[key];
        else if (additional && additional->is_object()) child_schema = additional;
        out.emplace_back(Value::String(key), Convert(child, child_schema, false, depth + 1));
      }
      return Value::Map(std::move(out));
    }
    default: return Value();  // binary / discarded: not produced by JSON parsing
  }
}

}  // namespace

}  // namespace mf::local::cel
