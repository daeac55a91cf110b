#include "perf/perf_json_read.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace braid::perf {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : t_(text) {}

  bool document(JsonValue* out, std::string* error) {
    if (!value(out, 0)) {
      *error = "offset " + std::to_string(at_) + ": " + error_;
      return false;
    }
    space();
    if (at_ != t_.size()) {
      *error = "offset " + std::to_string(at_) + ": text after the JSON value";
      return false;
    }
    return true;
  }

 private:
  static constexpr int kMaxDepth = 64;  // reports nest 4 deep; bounds the recursion

  bool fail(const char* what) {
    error_ = what;
    return false;
  }
  void space() {
    while (at_ < t_.size() && (t_[at_] == ' ' || t_[at_] == '\n' || t_[at_] == '\t' || t_[at_] == '\r')) ++at_;
  }
  bool literal(const char* word) {
    const size_t n = std::strlen(word);
    if (t_.compare(at_, n, word) != 0) return false;
    at_ += n;
    return true;
  }

  bool value(JsonValue* v, int depth) {
    if (depth > kMaxDepth) return fail("nested too deep");
    space();
    if (at_ >= t_.size()) return fail("unexpected end");
    const char c = t_[at_];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') {
      v->kind = JsonValue::Kind::String;
      return string(&v->text);
    }
    if (literal("true") || literal("false")) {
      v->kind = JsonValue::Kind::Bool;
      v->boolean = t_[at_ - 1] == 'e' && t_[at_ - 2] == 'u';
      return true;
    }
    if (literal("null")) {
      v->kind = JsonValue::Kind::Null;
      return true;
    }
    const char* begin = t_.c_str() + at_;
    char* end = nullptr;
    errno = 0;
    v->number = std::strtod(begin, &end);
    if (end == begin || errno == ERANGE) return fail("expected a value");
    v->kind = JsonValue::Kind::Number;
    at_ += static_cast<size_t>(end - begin);
    return true;
  }

  bool object(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::Object;
    ++at_;  // {
    space();
    if (at_ < t_.size() && t_[at_] == '}') return ++at_, true;
    for (;;) {
      space();
      std::string key;
      if (at_ >= t_.size() || t_[at_] != '"') return fail("expected a key");
      if (!string(&key)) return false;
      space();
      if (at_ >= t_.size() || t_[at_] != ':') return fail("expected ':'");
      ++at_;
      JsonValue member;
      if (!value(&member, depth + 1)) return false;
      v->members[key] = std::move(member);
      space();
      if (at_ < t_.size() && t_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < t_.size() && t_[at_] == '}') return ++at_, true;
      return fail("expected ',' or '}'");
    }
  }

  bool array(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::Array;
    ++at_;  // [
    space();
    if (at_ < t_.size() && t_[at_] == ']') return ++at_, true;
    for (;;) {
      JsonValue item;
      if (!value(&item, depth + 1)) return false;
      v->items.push_back(std::move(item));
      space();
      if (at_ < t_.size() && t_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < t_.size() && t_[at_] == ']') return ++at_, true;
      return fail("expected ',' or ']'");
    }
  }

  // A string; \uXXXX below 0x80 is kept, others become '?' (labels only need ASCII).
  bool string(std::string* out) {
    ++at_;  // "
    while (at_ < t_.size()) {
      const char c = t_[at_++];
      if (c == '"') return true;
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (at_ >= t_.size()) break;
      const char e = t_[at_++];
      switch (e) {
        case 'n': *out += '\n'; break;
        case 't': *out += '\t'; break;
        case 'r': *out += '\r'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'u': {
          if (at_ + 4 > t_.size()) return fail("short \\u escape");
          const long code = std::strtol(t_.substr(at_, 4).c_str(), nullptr, 16);
          *out += code < 0x80 ? static_cast<char>(code) : '?';
          at_ += 4;
          break;
        }
        default: *out += e;  // \" \\ \/
      }
    }
    return fail("unterminated string");
  }

  const std::string& t_;
  size_t at_ = 0;
  std::string error_;
};

double numberAt(const JsonValue& v, const std::string& key, double otherwise) {
  const JsonValue* m = v.find(key);
  return m != nullptr && m->kind == JsonValue::Kind::Number ? m->number : otherwise;
}

std::string textAt(const JsonValue& v, const std::string& key) {
  const JsonValue* m = v.find(key);
  return m != nullptr && m->kind == JsonValue::Kind::String ? m->text : std::string();
}

Measurement measurementAt(const JsonValue& row, const std::string& key) {
  Measurement m;
  if (const JsonValue* p = row.find(key)) {
    m.timeUs = numberAt(*p, "time", 0);
    m.algBw = numberAt(*p, "alg_bw", 0);
    m.busBw = numberAt(*p, "bus_bw", 0);
    m.wrong = static_cast<int64_t>(numberAt(*p, "nwrong", 0));
  }
  return m;
}

}  // namespace

const JsonValue* JsonValue::find(const std::string& key) const {
  if (kind != Kind::Object) return nullptr;
  auto it = members.find(key);
  return it == members.end() ? nullptr : &it->second;
}

bool parseJson(const std::string& text, JsonValue* out, std::string* error) {
  *out = JsonValue{};
  return Parser(text).document(out, error);
}

std::string libraryLabel(const std::string& fileName, int version) {
  const std::string dotted = std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
                             std::to_string(version % 100);
  if (fileName.find("braid") != std::string::npos) return "braid";
  if (fileName.rfind("libnccl", 0) == 0) return "NCCL " + dotted;
  if (!fileName.empty()) return fileName;
  return "NCCL API " + dotted;
}

bool reportSeriesFromJson(const std::string& text, ReportSeries* out, std::string* error) {
  JsonValue doc;
  if (!parseJson(text, &doc, error)) return false;
  const JsonValue* results = doc.find("results");
  if (results == nullptr || results->kind != JsonValue::Kind::Array) {
    *error = "no \"results\" list: not a braid-perf --json report";
    return false;
  }
  *out = ReportSeries{};
  out->library = textAt(doc, "library");
  if (out->library.empty()) out->library = libraryLabel("", static_cast<int>(numberAt(doc, "nccl_version", 0)));
  if (const JsonValue* config = doc.find("config")) {
    out->collective = textAt(*config, "collective");
    out->nRanks = static_cast<int>(numberAt(*config, "nranks", 0));
  }
  for (const JsonValue& r : results->items) {
    ResultRow row;
    row.bytes = static_cast<size_t>(numberAt(r, "size", 0));
    row.count = static_cast<size_t>(numberAt(r, "count", 0));
    row.type = textAt(r, "type");
    row.op = textAt(r, "redop");
    row.root = static_cast<int>(numberAt(r, "root", -1));
    row.outOfPlace = measurementAt(r, "out_of_place");
    row.inPlace = measurementAt(r, "in_place");
    out->rows.push_back(std::move(row));
  }
  return true;
}

bool loadReportSeries(const std::string& path, ReportSeries* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    *error = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::string why;
  if (!reportSeriesFromJson(text, out, &why)) {
    *error = path + ": " + why;
    return false;
  }
  const size_t slash = path.rfind('/');
  out->source = slash == std::string::npos ? path : path.substr(slash + 1);
  return true;
}

}  // namespace braid::perf
