// The report as JSON, described field by field in docs/doctor.schema.json.
#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "report.h"

namespace braid::doctor {

namespace {

// Length of the valid UTF-8 sequence at s[i] (1-4), or 0 when it is not one: overlong forms,
// surrogates and code points above U+10FFFF are invalid too.
size_t utf8Length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[40];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}

class Writer {
 public:
  void open(char c) { sep(); out_ += c; first_ = true; }
  void close(char c) { out_ += c; first_ = false; }
  void key(const char* k) {
    sep();
    out_ += jsonString(k) + ":";
    first_ = true;  // the value follows without a comma
  }
  void str(const std::string& s) { sep(); out_ += jsonString(s); }
  void raw(const std::string& s) { sep(); out_ += s; }
  void field(const char* k, const std::string& v) { key(k); str(v); }
  void field(const char* k, double v) { key(k); raw(num(v)); }
  void flag(const char* k, bool v) { key(k); raw(v ? "true" : "false"); }
  std::string take() { return std::move(out_); }

 private:
  void sep() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  std::string out_;
  bool first_ = true;
};

}  // namespace

std::string jsonString(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c == '\b') out += "\\b";
    else if (c == '\f') out += "\\f";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else if (c < 0x80) out += static_cast<char>(c);
    else {
      size_t n = utf8Length(s, i);
      if (n == 0) {
        out += "\xef\xbf\xbd";  // U+FFFD for a byte that starts no valid sequence
        ++i;
        continue;
      }
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    ++i;
  }
  return out + "\"";
}

std::string reportJson(const Report& r, const RunInfo& run) {
  Writer w;
  Severity worst = worstSeverity(r);
  w.open('{');
  w.field("schema", std::string("braid-doctor/1"));
  w.field("braidVersion", run.braidVersion);
  w.flag("quick", run.quick);
  w.field("status", std::string(severityName(worst)));
  w.field("exitCode", static_cast<double>(exitCodeFor(worst)));
  w.field("seconds", r.seconds);
  w.key("parts");
  w.open('[');
  for (const auto& p : run.parts) {
    w.open('{');
    w.field("name", p.name);
    w.flag("ran", p.ran);
    w.field("seconds", p.seconds);
    w.field("budgetSeconds", p.budget);
    w.close('}');
  }
  w.close(']');
  w.key("facts");
  w.open('[');
  for (const auto& f : r.facts) {
    w.open('{');
    w.field("section", f.section);
    w.field("name", f.name);
    w.field("value", f.value);
    w.field("severity", std::string(severityName(f.severity)));
    w.field("verdict", f.verdict);
    w.close('}');
  }
  w.close(']');
  w.key("blocks");
  w.open('[');
  for (const auto& b : r.blocks) {
    w.open('{');
    w.field("title", b.title);
    w.field("text", b.text);
    w.close('}');
  }
  w.close(']');
  w.key("figures");
  w.open('[');
  for (const auto& f : r.figures) {
    w.open('{');
    w.field("section", f.section);
    w.field("path", f.path);
    w.field("unit", f.unit);
    w.key("points");
    w.open('[');
    for (const auto& p : f.points) {
      w.open('{');
      w.field("bytes", p.bytes);
      w.field("value", p.value);
      w.close('}');
    }
    w.close(']');
    w.field("best", f.best);
    w.field("expected", f.expected);
    w.field("expectedWhy", f.expectedWhy);
    w.field("severity", std::string(severityName(f.severity)));
    w.field("verdict", f.verdict);
    w.close('}');
  }
  w.close(']');
  w.key("skipped");
  w.open('[');
  for (const auto& s : r.skipped) {
    w.open('{');
    w.field("part", s.part);
    w.field("reason", s.reason);
    w.close('}');
  }
  w.close(']');
  w.close('}');
  return w.take() + "\n";
}

bool writeTextFile(const std::string& path, const std::string& text, std::string* error) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    *error = path + ": cannot open for writing: " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int werr = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    werr = errno;
  }
  if (!ok) *error = path + ": write failed: " + std::strerror(werr);
  return ok;
}

}  // namespace braid::doctor
