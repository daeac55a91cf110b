#include "tools/braid-doctor/measure_json.h"

#include <cstdlib>
#include <cstring>

namespace braid::doctor::measure {

const Json* Json::get(const std::string& key) const {
  if (type != Type::Object) return nullptr;
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  bool document(Json* out, std::string* why) {
    bool ok = value(out, 0) && (space(), pos_ == s_.size());
    if (!ok) *why = "JSON: " + (error_.empty() ? std::string("trailing text") : error_) + " at offset " + std::to_string(pos_);
    return ok;
  }

 private:
  static constexpr int kMaxDepth = 64;

  void space() {
    while (pos_ < s_.size() && std::strchr(" \t\r\n", s_[pos_]) != nullptr) ++pos_;
  }
  bool fail(const char* what) {
    if (error_.empty()) error_ = what;
    return false;
  }
  bool literal(const char* word) {
    size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) return fail("unknown literal");
    pos_ += n;
    return true;
  }

  bool value(Json* out, int depth) {
    if (depth > kMaxDepth) return fail("nested too deep");
    space();
    if (pos_ >= s_.size()) return fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out->type = Json::Type::String;
      return string(&out->text);
    }
    if (c == 't' || c == 'f') {
      out->type = Json::Type::Bool;
      out->boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      out->type = Json::Type::Null;
      return literal("null");
    }
    const char* start = s_.c_str() + pos_;
    char* end = nullptr;
    out->number = std::strtod(start, &end);
    if (end == start) return fail("not a value");
    out->type = Json::Type::Number;
    pos_ += static_cast<size_t>(end - start);
    return true;
  }

  bool array(Json* out, int depth) {
    out->type = Json::Type::Array;
    ++pos_;
    space();
    if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
    for (;;) {
      out->items.emplace_back();
      if (!value(&out->items.back(), depth + 1)) return false;
      space();
      if (pos_ >= s_.size()) return fail("unterminated array");
      if (s_[pos_] == ']') return ++pos_, true;
      if (s_[pos_++] != ',') return fail("expected , or ] in array");
    }
  }

  bool object(Json* out, int depth) {
    out->type = Json::Type::Object;
    ++pos_;
    space();
    if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
    for (;;) {
      space();
      std::string key;
      if (pos_ >= s_.size() || s_[pos_] != '"' || !string(&key)) return fail("expected a key");
      space();
      if (pos_ >= s_.size() || s_[pos_++] != ':') return fail("expected :");
      out->members.emplace_back(std::move(key), Json{});
      if (!value(&out->members.back().second, depth + 1)) return false;
      space();
      if (pos_ >= s_.size()) return fail("unterminated object");
      if (s_[pos_] == '}') return ++pos_, true;
      if (s_[pos_++] != ',') return fail("expected , or } in object");
    }
  }

  static void utf8(unsigned code, std::string* out) {
    if (code < 0x80) {
      out->push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (code >> 6)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else if (code < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (code >> 12)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (code >> 18)));
      out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
    }
  }

  bool hex4(unsigned* code) {
    if (pos_ + 4 > s_.size()) return fail("short \\u escape");
    *code = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      unsigned d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 16;
      if (d > 15) return fail("bad \\u escape");
      *code = *code * 16 + d;
    }
    return true;
  }

  bool string(std::string* out) {
    ++pos_;  // the opening quote
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) break;
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
          unsigned code = 0;
          if (!hex4(&code)) return false;
          if (code >= 0xd800 && code < 0xdc00 && s_.compare(pos_, 2, "\\u") == 0) {
            pos_ += 2;
            unsigned low = 0;
            if (!hex4(&low) || low < 0xdc00 || low >= 0xe000) return fail("bad surrogate pair");
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          }
          utf8(code, out);
          break;
        }
        default: return fail("bad escape");
      }
    }
    return fail("unterminated string");
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

bool parseJson(const std::string& text, Json* out, std::string* why) {
  *out = Json{};
  return Parser(text).document(out, why);
}

}  // namespace braid::doctor::measure
