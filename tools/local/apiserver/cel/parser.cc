#include "tools/local/apiserver/cel/parser.h"

#include <set>

#include "tools/local/apiserver/cel/lexer.h"

namespace mf::local::cel {
namespace {

using ExprPtr = std::unique_ptr<Expr>;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  StatusOr<ExprPtr> Run() {
    MF_ASSIGN_OR_RETURN(ExprPtr e, ParseExpr());
    if (Peek().kind != Token::Kind::kEnd) return Error(Peek(), "extraneous input '" + Peek().text + "'");
    return e;
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  bool IsPunct(const char* p, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kPunct && Peek(ahead).text == p;
  }
  bool Accept(const char* p) {
    if (!IsPunct(p)) return false;
    ++pos_;
    return true;
  }
  Status Error(const Token& t, const std::string& what) const {
    return InvalidArgument("Syntax error at " + std::to_string(t.offset) + ": " + what);
  }
  Status Expect(const char* p) {
    if (Accept(p)) return Status::Ok();
    return Error(Peek(), "expected '" + std::string(p) + "' but found '" + Peek().text + "'");
  }

  StatusOr<ExprPtr> Make(Expr::Kind kind, std::string name, std::vector<ExprPtr> args, size_t offset) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->name = std::move(name);
    e->offset = offset;
    for (const auto& a : args) e->depth = std::max(e->depth, a->depth + 1);
    e->args = std::move(args);
    if (e->depth > kMaxNestingDepth) {
      return InvalidArgument("Syntax error at " + std::to_string(offset) + ": expression nested more than " +
                             std::to_string(kMaxNestingDepth) + " levels deep");
    }
    return e;
  }
  template <typename... A>
  std::vector<ExprPtr> Args(A&&... a) {
    std::vector<ExprPtr> v;
    (v.push_back(std::move(a)), ...);
    return v;
  }

  // Guards the parser's own recursion (parentheses, lists, unary chains).
  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };

  StatusOr<ExprPtr> ParseExpr() {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxNestingDepth) return Error(Peek(), "expression nested more than " + std::to_string(kMaxNestingDepth) + " levels deep");
    MF_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
    if (!IsPunct("?")) return cond;
    const size_t at = Peek().offset;
    ++pos_;
    MF_ASSIGN_OR_RETURN(ExprPtr then, ParseOr());
    MF_RETURN_IF_ERROR(Expect(":"));
    MF_ASSIGN_OR_RETURN(ExprPtr otherwise, ParseExpr());
    return Make(Expr::Kind::kConditional, "", Args(std::move(cond), std::move(then), std::move(otherwise)), at);
  }

  StatusOr<ExprPtr> ParseOr() {
    MF_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsPunct("||")) {
      const size_t at = Peek().offset;
      ++pos_;
      MF_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      MF_ASSIGN_OR_RETURN(left, Make(Expr::Kind::kOr, "", Args(std::move(left), std::move(right)), at));
    }
    return left;
  }

  StatusOr<ExprPtr> ParseAnd() {
    MF_ASSIGN_OR_RETURN(ExprPtr left, ParseRelation());
    while (IsPunct("&&")) {
      const size_t at = Peek().offset;
      ++pos_;
      MF_ASSIGN_OR_RETURN(ExprPtr right, ParseRelation());
      MF_ASSIGN_OR_RETURN(left, Make(Expr::Kind::kAnd, "", Args(std::move(left), std::move(right)), at));
    }
    return left;
  }

  StatusOr<ExprPtr> ParseRelation() {
    MF_ASSIGN_OR_RETURN(ExprPtr left, ParseAddition());
    while (true) {
      std::string fn;
      if (IsPunct("==")) fn = "_==_";
      else if (IsPunct("!=")) fn = "_!=_";
      else if (IsPunct("<")) fn = "_<_";
      else if (IsPunct("<=")) fn = "_<=_";
      else if (IsPunct(">")) fn = "_>_";
      else if (IsPunct(">=")) fn = "_>=_";
      else if (Peek().kind == Token::Kind::kIdent && Peek().text == "in") fn = "@in";
      else break;
      const size_t at = Peek().offset;
      ++pos_;
      MF_ASSIGN_OR_RETURN(ExprPtr right, ParseAddition());
      MF_ASSIGN_OR_RETURN(left, Make(Expr::Kind::kCall, fn, Args(std::move(left), std::move(right)), at));
    }
    return left;
  }

  StatusOr<ExprPtr> ParseAddition() {
    MF_ASSIGN_OR_RETURN(ExprPtr left, ParseMultiplication());
    while (IsPunct("+") || IsPunct("-")) {
      const std::string fn = IsPunct("+") ? "_+_" : "_-_";
      const size_t at = Peek().offset;
      ++pos_;
      MF_ASSIGN_OR_RETURN(ExprPtr right, ParseMultiplication());
      MF_ASSIGN_OR_RETURN(left, Make(Expr::Kind::kCall, fn, Args(std::move(left), std::move(right)), at));
    }
    return left;
  }

  StatusOr<ExprPtr> ParseMultiplication() {
    MF_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary());
    while (IsPunct("*") || IsPunct("/") || IsPunct("%")) {
      const std::string fn = "_" + Peek().text + "_";
      const size_t at = Peek().offset;
      ++pos_;
      MF_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary());
      MF_ASSIGN_OR_RETURN(left, Make(Expr::Kind::kCall, fn, Args(std::move(left), std::move(right)), at));
    }
    return left;
  }

  StatusOr<ExprPtr> ParseUnary() {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxNestingDepth) return Error(Peek(), "expression nested more than " + std::to_string(kMaxNestingDepth) + " levels deep");
    if (IsPunct("!")) {
      const size_t at = Peek().offset;
      ++pos_;
      MF_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary());
      return Make(Expr::Kind::kCall, "!_", Args(std::move(operand)), at);
    }
    if (IsPunct("-")) {
      const size_t at = Peek().offset;
      ++pos_;
      // A negative numeric literal is folded so that -9223372036854775808 is representable.
      if (Peek().kind == Token::Kind::kLiteral && !IsMemberContinuation(1)) {
        const Token& t = Peek();
        if (t.literal.kind() == Value::Kind::kInt) {
          ++pos_;
          Value v = t.int_min_magnitude ? t.literal : Value::Int(-t.literal.int_value());
          return Literal(std::move(v), at);
        }
        if (t.literal.kind() == Value::Kind::kDouble) {
          ++pos_;
          return Literal(Value::Double(-t.literal.double_value()), at);
        }
      }
      MF_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary());
      return Make(Expr::Kind::kCall, "-_", Args(std::move(operand)), at);
    }
    return ParseMember();
  }

  bool IsMemberContinuation(size_t ahead) const { return IsPunct(".", ahead) || IsPunct("[", ahead); }

  StatusOr<ExprPtr> Literal(Value v, size_t at) {
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kLiteral;
    e->literal = std::move(v);
    e->offset = at;
    return e;
  }

  StatusOr<ExprPtr> ParseMember() {
    MF_ASSIGN_OR_RETURN(ExprPtr e, ParsePrimary());
    while (true) {
      if (IsPunct(".")) {
        ++pos_;
        if (Peek().kind != Token::Kind::kIdent) return Error(Peek(), "expected a field or method name after '.'");
        const Token name = Peek();
        ++pos_;
        if (Accept("(")) {
          MF_ASSIGN_OR_RETURN(std::vector<ExprPtr> args, ParseArgs(")"));
          MF_ASSIGN_OR_RETURN(e, ReceiverCall(std::move(e), name, std::move(args)));
        } else {
          MF_ASSIGN_OR_RETURN(e, Make(Expr::Kind::kSelect, name.text, Args(std::move(e)), name.offset));
        }
      } else if (IsPunct("[")) {
        const size_t at = Peek().offset;
        ++pos_;
        MF_ASSIGN_OR_RETURN(ExprPtr index, ParseExpr());
        MF_RETURN_IF_ERROR(Expect("]"));
        MF_ASSIGN_OR_RETURN(e, Make(Expr::Kind::kCall, "_[_]", Args(std::move(e), std::move(index)), at));
      } else {
        return e;
      }
    }
  }

  // Arguments up to `close`, allowing a trailing comma in list and map literals only.
  StatusOr<std::vector<ExprPtr>> ParseArgs(const char* close) {
    std::vector<ExprPtr> args;
    if (Accept(close)) return args;
    while (true) {
      MF_ASSIGN_OR_RETURN(ExprPtr a, ParseExpr());
      args.push_back(std::move(a));
      if (Accept(close)) return args;
      MF_RETURN_IF_ERROR(Expect(","));
    }
  }

  StatusOr<ExprPtr> ReceiverCall(ExprPtr target, const Token& name, std::vector<ExprPtr> args) {
    static const std::set<std::string> kMacros = {"all", "exists", "exists_one", "map", "filter"};
    if (kMacros.count(name.text) && (args.size() == 2 || (name.text == "map" && args.size() == 3))) {
      if (args[0]->kind != Expr::Kind::kIdent) return Error(name, "argument must be a simple name");
      std::string var = args[0]->name;
      std::vector<ExprPtr> rest;
      rest.push_back(std::move(target));
      for (size_t i = 1; i < args.size(); ++i) rest.push_back(std::move(args[i]));
      MF_ASSIGN_OR_RETURN(ExprPtr e, Make(Expr::Kind::kComprehension, name.text, std::move(rest), name.offset));
      e->var = std::move(var);
      return e;
    }
    std::vector<ExprPtr> all;
    all.push_back(std::move(target));
    for (auto& a : args) all.push_back(std::move(a));
    MF_ASSIGN_OR_RETURN(ExprPtr e, Make(Expr::Kind::kCall, name.text, std::move(all), name.offset));
    e->receiver_style = true;
    return e;
  }

  StatusOr<ExprPtr> ParsePrimary() {
    const Token t = Peek();
    switch (t.kind) {
      case Token::Kind::kLiteral:
        ++pos_;
        if (t.int_min_magnitude) return Error(t, "integer literal out of range: " + t.text);
        return Literal(t.literal, t.offset);
      case Token::Kind::kIdent: {
        if (t.text == "in") return Error(t, "reserved identifier 'in'");
        ++pos_;
        if (Accept("(")) {
          MF_ASSIGN_OR_RETURN(std::vector<ExprPtr> args, ParseArgs(")"));
          if (t.text == "has") {
            if (args.size() != 1 || args[0]->kind != Expr::Kind::kSelect) return Error(t, "invalid argument to has() macro");
            ExprPtr select = std::move(args[0]);
            return Make(Expr::Kind::kHas, select->name, std::move(select->args), t.offset);
          }
          return Make(Expr::Kind::kCall, t.text, std::move(args), t.offset);
        }
        auto e = std::make_unique<Expr>();
        e->kind = Expr::Kind::kIdent;
        e->name = t.text;
        e->offset = t.offset;
        return e;
      }
      case Token::Kind::kPunct:
        if (t.text == "(") {
          ++pos_;
          MF_ASSIGN_OR_RETURN(ExprPtr e, ParseExpr());
          MF_RETURN_IF_ERROR(Expect(")"));
          return e;
        }
        if (t.text == "[") {
          ++pos_;
          MF_ASSIGN_OR_RETURN(std::vector<ExprPtr> items, ParseListItems());
          return Make(Expr::Kind::kList, "", std::move(items), t.offset);
        }
        if (t.text == "{") {
          ++pos_;
          MF_ASSIGN_OR_RETURN(std::vector<ExprPtr> entries, ParseMapEntries());
          return Make(Expr::Kind::kMap, "", std::move(entries), t.offset);
        }
        if (t.text == ".") return Error(t, "leading '.' names are not supported");
        return Error(t, "mismatched input '" + t.text + "'");
      case Token::Kind::kEnd:
        return Error(t, "unexpected end of expression");
    }
    return Error(t, "unexpected token");
  }

  StatusOr<std::vector<ExprPtr>> ParseListItems() {
    std::vector<ExprPtr> items;
    while (!Accept("]")) {
      MF_ASSIGN_OR_RETURN(ExprPtr e, ParseExpr());
      items.push_back(std::move(e));
      if (Accept("]")) break;
      MF_RETURN_IF_ERROR(Expect(","));
    }
    return items;
  }

  StatusOr<std::vector<ExprPtr>> ParseMapEntries() {
    std::vector<ExprPtr> entries;
    while (!Accept("}")) {
      MF_ASSIGN_OR_RETURN(ExprPtr k, ParseExpr());
      MF_RETURN_IF_ERROR(Expect(":"));
      MF_ASSIGN_OR_RETURN(ExprPtr v, ParseExpr());
      entries.push_back(std::move(k));
      entries.push_back(std::move(v));
      if (Accept("}")) break;
      MF_RETURN_IF_ERROR(Expect(","));
    }
    return entries;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Expr>> Parse(std::string_view source) {
  if (source.size() > kMaxExpressionLength) {
    return InvalidArgument("expression is " + std::to_string(source.size()) + " bytes, more than the limit of " +
                           std::to_string(kMaxExpressionLength));
  }
  MF_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  return Parser(std::move(tokens)).Run();
}

}  // namespace mf::local::cel
