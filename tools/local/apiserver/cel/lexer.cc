#include "tools/local/apiserver/cel/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>

namespace mf::local::cel {
namespace {

Status Error(size_t offset, const std::string& what) {
  return InvalidArgument("Syntax error at " + std::to_string(offset) + ": " + what);
}

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  StatusOr<std::vector<Token>> Run() {
    std::vector<Token> out;
    while (true) {
      SkipSpaceAndComments();
      if (pos_ >= s_.size()) break;
      const size_t start = pos_;
      const char c = s_[pos_];
      if ((c == 'r' || c == 'R' || c == 'b' || c == 'B') && pos_ + 1 < s_.size()) {
        // Prefixes: r"..", b"..", rb"..", br"..".
        size_t p = pos_;
        bool raw = false, bytes = false;
        for (int i = 0; i < 2 && p < s_.size(); ++i) {
          char q = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[p])));
          if (q == 'r' && !raw) raw = true, ++p;
          else if (q == 'b' && !bytes) bytes = true, ++p;
          else break;
        }
        if (p < s_.size() && (s_[p] == '"' || s_[p] == '\'')) {
          pos_ = p;
          MF_ASSIGN_OR_RETURN(std::string text, ReadString(raw, bytes));
          out.push_back({Token::Kind::kLiteral, std::string(s_.substr(start, pos_ - start)),
                         bytes ? Value::Bytes(std::move(text)) : Value::String(std::move(text)), start});
          continue;
        }
      }
      if (IsIdentStart(c)) {
        while (pos_ < s_.size() && IsIdentChar(s_[pos_])) ++pos_;
        std::string word(s_.substr(start, pos_ - start));
        if (word == "true" || word == "false") {
          out.push_back({Token::Kind::kLiteral, word, Value::Bool(word == "true"), start});
        } else if (word == "null") {
          out.push_back({Token::Kind::kLiteral, word, Value(), start});
        } else {
          out.push_back({Token::Kind::kIdent, word, Value(), start});
        }
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && pos_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1])))) {
        MF_ASSIGN_OR_RETURN(Token t, ReadNumber());
        out.push_back(std::move(t));
        continue;
      }
      if (c == '"' || c == '\'') {
        MF_ASSIGN_OR_RETURN(std::string text, ReadString(false, false));
        out.push_back({Token::Kind::kLiteral, std::string(s_.substr(start, pos_ - start)), Value::String(std::move(text)), start});
        continue;
      }
      static const char* const kTwo[] = {"==", "!=", "<=", ">=", "&&", "||"};
      bool matched = false;
      for (const char* op : kTwo) {
        if (s_.substr(pos_, 2) == op) {
          out.push_back({Token::Kind::kPunct, op, Value(), start});
          pos_ += 2;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      static const std::string_view kOne = "+-*/%<>!?:.,[](){}";
      if (kOne.find(c) != std::string_view::npos) {
        out.push_back({Token::Kind::kPunct, std::string(1, c), Value(), start});
        ++pos_;
        continue;
      }
      return Error(start, "token recognition error at: '" + std::string(1, c) + "'");
    }
    out.push_back({Token::Kind::kEnd, "<EOF>", Value(), s_.size()});
    return out;
  }

 private:
  void SkipSpaceAndComments() {
    while (pos_ < s_.size()) {
      if (std::isspace(static_cast<unsigned char>(s_[pos_]))) {
        ++pos_;
      } else if (s_.substr(pos_, 2) == "//") {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  StatusOr<Token> ReadNumber() {
    const size_t start = pos_;
    if (s_.substr(pos_, 2) == "0x" || s_.substr(pos_, 2) == "0X") {
      pos_ += 2;
      const size_t digits = pos_;
      while (pos_ < s_.size() && HexDigit(s_[pos_]) >= 0) ++pos_;
      if (pos_ == digits) return Error(start, "malformed hex literal");
      return IntToken(start, std::string(s_.substr(digits, pos_ - digits)), 16);
    }
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    bool is_double = false;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))) {
      is_double = true;
      ++pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
      if (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) {
        is_double = true;
        pos_ = p;
        while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      }
    }
    std::string text(s_.substr(start, pos_ - start));
    if (is_double) {
      errno = 0;
      double d = std::strtod(text.c_str(), nullptr);
      if (errno == ERANGE && std::abs(d) > 1) return Error(start, "double literal out of range: " + text);
      return Token{Token::Kind::kLiteral, text, Value::Double(d), start};
    }
    return IntToken(start, text, 10);
  }

  StatusOr<Token> IntToken(size_t start, const std::string& digits, int base) {
    bool is_uint = pos_ < s_.size() && (s_[pos_] == 'u' || s_[pos_] == 'U');
    if (is_uint) ++pos_;
    if (pos_ < s_.size() && IsIdentChar(s_[pos_])) return Error(start, "malformed number literal");
    std::string text(s_.substr(start, pos_ - start));
    errno = 0;
    unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
    if (errno == ERANGE) return Error(start, "integer literal out of range: " + text);
    if (is_uint) return Token{Token::Kind::kLiteral, text, Value::Uint(v), start};
    constexpr unsigned long long kMax = static_cast<unsigned long long>(std::numeric_limits<int64_t>::max());
    if (v == kMax + 1) {
      Token t{Token::Kind::kLiteral, text, Value::Int(std::numeric_limits<int64_t>::min()), start};
      t.int_min_magnitude = true;
      return t;
    }
    if (v > kMax) return Error(start, "integer literal out of range: " + text);
    return Token{Token::Kind::kLiteral, text, Value::Int(static_cast<int64_t>(v)), start};
  }

  StatusOr<std::string> ReadString(bool raw, bool bytes) {
    const size_t start = pos_;
    const char quote = s_[pos_];
    const bool triple = s_.substr(pos_, 3) == std::string(3, quote);
    pos_ += triple ? 3 : 1;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) return Error(start, "unterminated string literal");
      const char c = s_[pos_];
      if (triple ? s_.substr(pos_, 3) == std::string(3, quote) : c == quote) {
        pos_ += triple ? 3 : 1;
        return out;
      }
      if (!triple && (c == '\n' || c == '\r')) return Error(start, "newline in string literal");
      if (c != '\\' || raw) {
        out.push_back(c);
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= s_.size()) return Error(start, "unterminated string literal");
      const char e = s_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case '\\': case '\'': case '"': case '`': case '?': out.push_back(e); break;
        case 'x': case 'X': case 'u': case 'U': {
          const size_t n = (e == 'x' || e == 'X') ? 2 : (e == 'u' ? 4 : 8);
          uint32_t cp = 0;
          for (size_t i = 0; i < n; ++i) {
            if (pos_ >= s_.size() || HexDigit(s_[pos_]) < 0) return Error(start, "invalid escape sequence");
            cp = cp * 16 + static_cast<uint32_t>(HexDigit(s_[pos_++]));
          }
          if (n == 2 && bytes) {
            out.push_back(static_cast<char>(cp));
          } else {
            if (bytes && n != 2) return Error(start, "unicode escape in bytes literal");
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return Error(start, "invalid unicode code point");
            AppendUtf8(&out, cp);
          }
          break;
        }
        default:
          if (e >= '0' && e <= '3') {  // octal: \ooo
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int i = 0; i < 2; ++i) {
              if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '7') return Error(start, "invalid octal escape");
              cp = cp * 8 + static_cast<uint32_t>(s_[pos_++] - '0');
            }
            if (bytes) out.push_back(static_cast<char>(cp));
            else AppendUtf8(&out, cp);
            break;
          }
          return Error(start, "invalid escape sequence '\\" + std::string(1, e) + "'");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<std::vector<Token>> Tokenize(std::string_view source) { return Lexer(source).Run(); }

}  // namespace mf::local::cel
