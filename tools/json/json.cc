#include "tools/json/json.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace braid::json {

const Value* Value::find(const std::string& key) const {
  if (type != Object) return nullptr;
  for (const auto& m : members)
    if (m.first == key) return &m.second;
  return nullptr;
}

namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  bool document(Value* out, std::string* error) {
    bool ok = value(out, 0) && (ws(), pos_ == s_.size() || fail("text after the value"));
    if (!ok) *error = "offset " + std::to_string(pos_) + ": " + why_;
    return ok;
  }

 private:
  bool fail(const char* why) {
    if (why_.empty()) why_ = why;
    return false;
  }
  void ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(const char* word) {
    size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) return fail("bad literal");
    pos_ += n;
    return true;
  }
  bool value(Value* out, int depth) {
    if (depth > 64) return fail("nested too deep");
    ws();
    if (pos_ >= s_.size()) return fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out->type = Value::String;
      return string(&out->text);
    }
    if (c == 't') return out->type = Value::Bool, out->boolean = true, literal("true");
    if (c == 'f') return out->type = Value::Bool, out->boolean = false, literal("false");
    if (c == 'n') return out->type = Value::Null, literal("null");
    return number(out);
  }
  bool number(Value* out) {
    size_t b = pos_;
    auto digits = [&] {
      size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > d;
    };
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') ++pos_;
    else if (!digits()) return fail("bad number");
    if (pos_ < s_.size() && s_[pos_] == '.' && (++pos_, !digits())) return fail("bad fraction");
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) return fail("bad exponent");
    }
    out->type = Value::Number;
    out->number = std::strtod(s_.substr(b, pos_ - b).c_str(), nullptr);
    return true;
  }
  void putUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) out->push_back(static_cast<char>(cp));
    else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  bool hex4(uint32_t* v) {
    if (pos_ + 4 > s_.size()) return fail("short \\u escape");
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return fail("bad \\u escape");
      *v = *v * 16 + static_cast<uint32_t>(d);
    }
    return true;
  }
  // One UTF-8 sequence copied as it is, checked (no overlongs, surrogates or > U+10FFFF).
  bool rawUtf8(std::string* out) {
    unsigned char c = static_cast<unsigned char>(s_[pos_]);
    size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (n == 0 || pos_ + n > s_.size()) return fail("invalid UTF-8");
    uint32_t cp = c & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
    for (size_t k = 1; k < n; ++k) {
      unsigned char d = static_cast<unsigned char>(s_[pos_ + k]);
      if ((d & 0xc0) != 0x80) return fail("invalid UTF-8");
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return fail("invalid UTF-8");
    out->append(s_, pos_, n);
    pos_ += n;
    return true;
  }
  bool string(std::string* out) {
    ++pos_;  // the opening quote
    for (;;) {
      if (pos_ >= s_.size()) return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return fail("raw control character in a string");
      if (c >= 0x80) {
        if (!rawUtf8(out)) return false;
        continue;
      }
      ++pos_;
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        continue;
      }
      if (pos_ >= s_.size()) return fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp;
          if (!hex4(&cp)) return false;
          if (cp >= 0xdc00 && cp <= 0xdfff) return fail("lone low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t lo;
            if (s_.compare(pos_, 2, "\\u") != 0) return fail("lone high surrogate");
            pos_ += 2;
            if (!hex4(&lo)) return false;
            if (lo < 0xdc00 || lo > 0xdfff) return fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          putUtf8(cp, out);
          break;
        }
        default: return fail("unknown escape");
      }
    }
  }
  bool array(Value* out, int depth) {
    out->type = Value::Array;
    ++pos_;
    ws();
    if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
    for (;;) {
      out->items.emplace_back();
      if (!value(&out->items.back(), depth + 1)) return false;
      ws();
      if (pos_ >= s_.size()) return fail("unterminated array");
      if (s_[pos_] == ']') return ++pos_, true;
      if (s_[pos_++] != ',') return fail("expected , or ]");
    }
  }
  bool object(Value* out, int depth) {
    out->type = Value::Object;
    ++pos_;
    ws();
    if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
    for (;;) {
      ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a key");
      std::string key;
      if (!string(&key)) return false;
      if (out->find(key)) return fail("duplicate key");
      ws();
      if (pos_ >= s_.size() || s_[pos_++] != ':') return fail("expected :");
      out->members.emplace_back(key, Value{});
      if (!value(&out->members.back().second, depth + 1)) return false;
      ws();
      if (pos_ >= s_.size()) return fail("unterminated object");
      if (s_[pos_] == '}') return ++pos_, true;
      if (s_[pos_++] != ',') return fail("expected , or }");
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string why_;
};

}  // namespace

bool parse(const std::string& text, Value* out, std::string* error) { return Parser(text).document(out, error); }

}  // namespace braid::json
