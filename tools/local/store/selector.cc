#include "tools/local/store/selector.h"

#include <algorithm>
#include <cctype>

namespace mf::local {
namespace {

using json = nlohmann::json;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits at top-level commas: commas inside "in (a,b)" belong to the value set.
StatusOr<std::vector<std::string_view>> SplitTerms(std::string_view text) {
  std::vector<std::string_view> terms;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      std::string_view term = Trim(text.substr(start, i - start));
      if (term.empty()) return InvalidArgument("selector \"" + std::string(text) + "\" has an empty term");
      terms.push_back(term);
      start = i + 1;
    } else if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')') {
      if (--depth < 0) return InvalidArgument("selector \"" + std::string(text) + "\" has an unbalanced ')'");
    }
  }
  if (depth != 0) return InvalidArgument("selector \"" + std::string(text) + "\" has an unbalanced '('");
  return terms;
}

bool ValidKey(std::string_view key) {
  if (key.empty() || key.size() > 317) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

bool ValidValue(std::string_view value) {
  if (value.size() > 63) return false;
  return std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

std::string LabelValue(const json& labels, const std::string& key, bool* present) {
  *present = false;
  if (!labels.is_object()) return "";
  auto it = labels.find(key);
  if (it == labels.end() || !it->is_string()) return "";
  *present = true;
  return it->get<std::string>();
}

std::string ScalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (v.is_structured()) return v.dump();
  return v.dump();  // numbers and booleans as JSON writes them: "3", "true"
}

}  // namespace

StatusOr<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector selector;
  if (Trim(text).empty()) return selector;
  MF_ASSIGN_OR_RETURN(auto terms, SplitTerms(text));
  for (std::string_view term : terms) {
    Requirement req;
    auto bad = [&](std::string_view why) {
      return InvalidArgument("invalid label selector term \"" + std::string(term) + "\": " + std::string(why));
    };
    size_t paren = term.find('(');
    if (paren != std::string_view::npos) {
      // "key in (a,b)" / "key notin (a,b)"
      if (term.back() != ')') return bad("expected ')' at the end");
      std::string_view head = Trim(term.substr(0, paren));
      size_t space = head.find_last_of(" \t");
      if (space == std::string_view::npos) return bad("expected 'key in (...)' or 'key notin (...)'");
      std::string_view op = Trim(head.substr(space + 1));
      req.key = std::string(Trim(head.substr(0, space)));
      if (op == "in") req.op = Op::kIn;
      else if (op == "notin") req.op = Op::kNotIn;
      else return bad("unknown operator \"" + std::string(op) + "\"");
      std::string_view inner = term.substr(paren + 1, term.size() - paren - 2);
      if (Trim(inner).empty()) return bad("the value set is empty");
      size_t start = 0;
      for (size_t i = 0; i <= inner.size(); ++i) {
        if (i == inner.size() || inner[i] == ',') {
          std::string_view v = Trim(inner.substr(start, i - start));
          if (!ValidValue(v)) return bad("invalid value \"" + std::string(v) + "\"");
          req.values.emplace_back(v);
          start = i + 1;
        }
      }
    } else if (size_t ne = term.find("!="); ne != std::string_view::npos) {
      req.key = std::string(Trim(term.substr(0, ne)));
      req.op = Op::kNotEquals;
      req.values.emplace_back(Trim(term.substr(ne + 2)));
    } else if (size_t eq2 = term.find("=="); eq2 != std::string_view::npos) {
      req.key = std::string(Trim(term.substr(0, eq2)));
      req.op = Op::kEquals;
      req.values.emplace_back(Trim(term.substr(eq2 + 2)));
    } else if (size_t eq = term.find('='); eq != std::string_view::npos) {
      req.key = std::string(Trim(term.substr(0, eq)));
      req.op = Op::kEquals;
      req.values.emplace_back(Trim(term.substr(eq + 1)));
    } else if (term.front() == '!') {
      req.key = std::string(Trim(term.substr(1)));
      req.op = Op::kDoesNotExist;
    } else {
      req.key = std::string(term);
      req.op = Op::kExists;
    }
    if (!ValidKey(req.key)) return bad("invalid key \"" + req.key + "\"");
    for (const auto& v : req.values) {
      if (!ValidValue(v)) return bad("invalid value \"" + v + "\"");
    }
    selector.requirements_.push_back(std::move(req));
  }
  return selector;
}

StatusOr<LabelSelector> LabelSelector::FromObject(const json& selector) {
  LabelSelector out;
  if (selector.is_null()) return out;
  if (!selector.is_object()) return InvalidArgument("a label selector must be an object");
  if (auto it = selector.find("matchLabels"); it != selector.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidArgument("matchLabels must be an object of strings");
    for (const auto& [key, value] : it->items()) {
      if (!value.is_string()) return InvalidArgument("matchLabels." + key + " must be a string");
      out.requirements_.push_back({key, Op::kEquals, {value.get<std::string>()}});
    }
  }
  if (auto it = selector.find("matchExpressions"); it != selector.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument("matchExpressions must be a list");
    for (const auto& expr : *it) {
      if (!expr.is_object() || !expr.contains("key") || !expr["key"].is_string() ||
          !expr.contains("operator") || !expr["operator"].is_string()) {
        return InvalidArgument("each matchExpressions entry needs string 'key' and 'operator'");
      }
      Requirement req{expr["key"].get<std::string>(), Op::kExists, {}};
      std::string op = expr["operator"].get<std::string>();
      if (op == "In") req.op = Op::kIn;
      else if (op == "NotIn") req.op = Op::kNotIn;
      else if (op == "Exists") req.op = Op::kExists;
      else if (op == "DoesNotExist") req.op = Op::kDoesNotExist;
      else return InvalidArgument("unknown matchExpressions operator \"" + op + "\"");
      if (auto values = expr.find("values"); values != expr.end() && values->is_array()) {
        for (const auto& v : *values) {
          if (!v.is_string()) return InvalidArgument("matchExpressions values must be strings");
          req.values.push_back(v.get<std::string>());
        }
      }
      if ((req.op == Op::kIn || req.op == Op::kNotIn) && req.values.empty()) {
        return InvalidArgument("matchExpressions operator " + op + " needs values");
      }
      out.requirements_.push_back(std::move(req));
    }
  }
  return out;
}

bool LabelSelector::Matches(const json& labels) const {
  for (const auto& req : requirements_) {
    bool present = false;
    std::string value = LabelValue(labels, req.key, &present);
    bool in_values = present && std::find(req.values.begin(), req.values.end(), value) != req.values.end();
    switch (req.op) {
      case Op::kEquals:
      case Op::kIn:
        if (!in_values) return false;
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        if (in_values) return false;
        break;
      case Op::kExists:
        if (!present) return false;
        break;
      case Op::kDoesNotExist:
        if (present) return false;
        break;
    }
  }
  return true;
}

StatusOr<FieldSelector> FieldSelector::Parse(std::string_view text) {
  FieldSelector selector;
  if (Trim(text).empty()) return selector;
  MF_ASSIGN_OR_RETURN(auto terms, SplitTerms(text));
  for (std::string_view term : terms) {
    Term t;
    size_t op_pos;
    size_t op_len;
    if ((op_pos = term.find("!=")) != std::string_view::npos) {
      t.negate = true;
      op_len = 2;
    } else if ((op_pos = term.find("==")) != std::string_view::npos) {
      t.negate = false;
      op_len = 2;
    } else if ((op_pos = term.find('=')) != std::string_view::npos) {
      t.negate = false;
      op_len = 1;
    } else {
      return InvalidArgument("invalid field selector term \"" + std::string(term) +
                             "\": expected field=value, field==value or field!=value");
    }
    std::string_view path = Trim(term.substr(0, op_pos));
    t.value = std::string(Trim(term.substr(op_pos + op_len)));
    if (path.empty()) return InvalidArgument("field selector term \"" + std::string(term) + "\" has no field");
    size_t start = 0;
    for (size_t i = 0; i <= path.size(); ++i) {
      if (i == path.size() || path[i] == '.') {
        if (i == start) return InvalidArgument("field selector path \"" + std::string(path) + "\" has an empty segment");
        t.path.emplace_back(path.substr(start, i - start));
        start = i + 1;
      }
    }
    selector.terms_.push_back(std::move(t));
  }
  return selector;
}

bool FieldSelector::Matches(const json& object) const {
  for (const auto& term : terms_) {
    const json* node = &object;
    for (const auto& segment : term.path) {
      if (!node->is_object()) { node = nullptr; break; }
      auto it = node->find(segment);
      if (it == node->end()) { node = nullptr; break; }
      node = &*it;
    }
    std::string value = node ? ScalarText(*node) : "";
    if ((value == term.value) == term.negate) return false;
  }
  return true;
}

}  // namespace mf::local
