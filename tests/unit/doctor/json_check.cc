#include "json_check.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace braid::doctor::test {

const Json* Json::find(const std::string& key) const {
  for (const auto& m : members)
    if (m.first == key) return &m.second;
  return nullptr;
}

namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  bool document(Json* out, std::string* error) {
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
  bool value(Json* out, int depth) {
    if (depth > 64) return fail("nested too deep");
    ws();
    if (pos_ >= s_.size()) return fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out->type = Json::String;
      return string(&out->text);
    }
    if (c == 't') return out->type = Json::Bool, out->boolean = true, literal("true");
    if (c == 'f') return out->type = Json::Bool, out->boolean = false, literal("false");
    if (c == 'n') return out->type = Json::Null, literal("null");
    return number(out);
  }
  bool number(Json* out) {
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
    out->type = Json::Number;
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
  bool array(Json* out, int depth) {
    out->type = Json::Array;
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
  bool object(Json* out, int depth) {
    out->type = Json::Object;
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
      out->members.emplace_back(key, Json{});
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

bool hasType(const Json& v, const std::string& t) {
  switch (v.type) {
    case Json::Null: return t == "null";
    case Json::Bool: return t == "boolean";
    case Json::Number: return t == "number" || (t == "integer" && std::floor(v.number) == v.number);
    case Json::String: return t == "string";
    case Json::Array: return t == "array";
    case Json::Object: return t == "object";
  }
  return false;
}

bool equal(const Json& a, const Json& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case Json::Null: return true;
    case Json::Bool: return a.boolean == b.boolean;
    case Json::Number: return a.number == b.number;
    case Json::String: return a.text == b.text;
    case Json::Array:
      if (a.items.size() != b.items.size()) return false;
      for (size_t i = 0; i < a.items.size(); ++i)
        if (!equal(a.items[i], b.items[i])) return false;
      return true;
    case Json::Object:
      if (a.members.size() != b.members.size()) return false;
      for (const auto& m : a.members) {
        const Json* o = b.find(m.first);
        if (!o || !equal(m.second, *o)) return false;
      }
      return true;
  }
  return false;
}

void check(const Json& v, const Json& schema, const std::string& path, std::vector<std::string>* errors) {
  if (schema.type != Json::Object) {
    errors->push_back(path + ": the schema here is not an object");
    return;
  }
  for (const auto& [kw, arg] : schema.members) {
    if (kw == "$schema" || kw == "$id" || kw == "title" || kw == "description") continue;
    if (kw == "type") {
      bool ok = false;
      if (arg.type == Json::String) ok = hasType(v, arg.text);
      else
        for (const auto& t : arg.items) ok |= t.type == Json::String && hasType(v, t.text);
      if (!ok) errors->push_back(path + ": wrong type");
    } else if (kw == "enum") {
      bool ok = false;
      for (const auto& e : arg.items) ok |= equal(v, e);
      if (!ok) errors->push_back(path + ": not one of the enum's values");
    } else if (kw == "required") {
      if (v.type != Json::Object) continue;
      for (const auto& k : arg.items)
        if (!v.find(k.text)) errors->push_back(path + ": missing " + k.text);
    } else if (kw == "properties") {
      if (v.type != Json::Object) continue;
      for (const auto& [name, sub] : arg.members)
        if (const Json* m = v.find(name)) check(*m, sub, path + "." + name, errors);
    } else if (kw == "additionalProperties") {
      if (v.type != Json::Object) continue;
      const Json* props = schema.find("properties");
      for (const auto& [name, m] : v.members) {
        if (props && props->find(name)) continue;
        if (arg.type == Json::Bool) {
          if (!arg.boolean) errors->push_back(path + ": property " + name + " is not allowed");
        } else {
          check(m, arg, path + "." + name, errors);
        }
      }
    } else if (kw == "items") {
      if (v.type != Json::Array) continue;
      for (size_t i = 0; i < v.items.size(); ++i) check(v.items[i], arg, path + "[" + std::to_string(i) + "]", errors);
    } else {
      errors->push_back(path + ": schema keyword " + kw + " is outside the validator's subset");
    }
  }
}

void findUndocumented(const Json& schema, const std::string& path, std::vector<std::string>* out) {
  if (schema.type != Json::Object) return;
  if (const Json* props = schema.find("properties"))
    for (const auto& [name, sub] : props->members) {
      const Json* d = sub.find("description");
      if (!d || d->type != Json::String || d->text.empty()) out->push_back(path + ".properties." + name);
      findUndocumented(sub, path + ".properties." + name, out);
    }
  if (const Json* items = schema.find("items")) findUndocumented(*items, path + ".items", out);
}

}  // namespace

bool parseJson(const std::string& text, Json* out, std::string* error) { return Parser(text).document(out, error); }

std::vector<std::string> validate(const Json& value, const Json& schema) {
  std::vector<std::string> errors;
  check(value, schema, "$", &errors);
  return errors;
}

std::vector<std::string> undocumented(const Json& schema) {
  std::vector<std::string> out;
  findUndocumented(schema, "$", &out);
  return out;
}

}  // namespace braid::doctor::test
