#include "topo/xml.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace braid::topo {

const std::string* XmlElement::attr(std::string_view key) const {
  for (const auto& kv : attrs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

std::string XmlElement::attrOr(std::string_view key, std::string_view fallback) const {
  const std::string* v = attr(key);
  return v ? *v : std::string(fallback);
}

void XmlElement::setAttr(std::string_view key, std::string value) {
  for (auto& kv : attrs)
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  attrs.emplace_back(std::string(key), std::move(value));
}

void XmlElement::removeAttr(std::string_view key) {
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].first == key) {
      attrs.erase(attrs.begin() + static_cast<long>(i));
      return;
    }
}

XmlElement& XmlElement::addChild(std::string childName) {
  children.emplace_back();
  children.back().name = std::move(childName);
  return children.back();
}

size_t XmlElement::countElements() const {
  size_t n = 1;
  for (const auto& c : children) n += c.countElements();
  return n;
}

namespace {

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == ':';
}
bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A single-pass reader over the text that tracks the line number for messages.
class Parser {
 public:
  Parser(std::string_view text, const std::string& source, const XmlLimits& limits)
      : text_(text), source_(source), limits_(limits) {}

  bool run(XmlElement* root, std::string* error) {
    bool haveRoot = false;
    // Stack of open elements. Only the innermost open element gains children, so the pointers
    // into its parent's children vector stay valid while it is open.
    std::vector<XmlElement*> open;
    size_t elements = 0;
    while (true) {
      skipText(open.empty());
      if (!error_.empty()) break;
      if (pos_ >= text_.size()) {
        if (!open.empty()) {
          fail(open.back()->line, "unexpected end of file: <" + open.back()->name + "> is not closed");
        } else if (!haveRoot) {
          fail(line_, "no root element");
        }
        break;
      }
      // At '<'.
      if (startsWith("<!--")) {
        skipComment();
        continue;
      }
      if (startsWith("<?")) {
        skipUntil("?>", "processing instruction");
        continue;
      }
      if (startsWith("<!")) {
        skipUntil(">", "declaration");
        continue;
      }
      if (startsWith("</")) {
        int closeLine = line_;
        pos_ += 2;
        std::string name = readName();
        skipSpaces();
        if (!expect('>')) break;
        if (open.empty()) {
          fail(closeLine, "closing tag </" + name + "> without an open element");
          break;
        }
        if (name != open.back()->name) {
          fail(closeLine, "closing tag </" + name + "> does not match <" + open.back()->name + "> opened at line " +
                              std::to_string(open.back()->line));
          break;
        }
        open.pop_back();
        continue;
      }
      // An opening tag.
      int openLine = line_;
      ++pos_;
      if (open.empty() && haveRoot) {
        fail(openLine, "more than one root element");
        break;
      }
      if (static_cast<int>(open.size()) >= limits_.maxDepth) {
        fail(openLine, "elements nested deeper than " + std::to_string(limits_.maxDepth));
        break;
      }
      if (++elements > limits_.maxElements) {
        fail(openLine, "more than " + std::to_string(limits_.maxElements) + " elements");
        break;
      }
      XmlElement* elem;
      if (open.empty()) {
        *root = XmlElement{};
        elem = root;
        haveRoot = true;
      } else {
        elem = &open.back()->children.emplace_back();
      }
      elem->line = openLine;
      elem->name = readName();
      if (elem->name.empty()) {
        fail(openLine, "expected an element name after '<'");
        break;
      }
      bool selfClosing = false;
      if (!readAttributes(elem, &selfClosing)) break;
      if (!selfClosing) open.push_back(elem);
    }
    if (!error_.empty()) {
      *error = error_;
      return false;
    }
    return true;
  }

 private:
  bool startsWith(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }

  void advance() {
    if (text_[pos_] == '\n') ++line_;
    ++pos_;
  }

  void fail(int line, const std::string& what) {
    if (error_.empty()) error_ = source_ + ":" + std::to_string(line) + ": " + what;
  }

  // Skips character data up to the next '<'. Text outside the root must be whitespace.
  void skipText(bool outsideRoot) {
    while (pos_ < text_.size() && text_[pos_] != '<') {
      if (outsideRoot && !isSpace(text_[pos_])) {
        fail(line_, "text outside the root element");
        return;
      }
      advance();
    }
  }

  void skipComment() {
    int startLine = line_;
    pos_ += 4;
    while (pos_ < text_.size() && !startsWith("-->")) advance();
    if (pos_ >= text_.size()) {
      fail(startLine, "unexpected end of file inside a comment");
      return;
    }
    pos_ += 3;
  }

  void skipUntil(std::string_view end, const char* what) {
    int startLine = line_;
    while (pos_ < text_.size() && !startsWith(end)) advance();
    if (pos_ >= text_.size()) {
      fail(startLine, std::string("unexpected end of file inside a ") + what);
      return;
    }
    pos_ += end.size();
  }

  void skipSpaces() {
    while (pos_ < text_.size() && isSpace(text_[pos_])) advance();
  }

  std::string readName() {
    size_t start = pos_;
    while (pos_ < text_.size() && isNameChar(text_[pos_]) && pos_ - start < limits_.maxValueLength) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  bool expect(char c) {
    if (pos_ >= text_.size()) {
      fail(line_, std::string("unexpected end of file, expected '") + c + "'");
      return false;
    }
    if (text_[pos_] != c) {
      fail(line_, std::string("expected '") + c + "', found '" + printable(text_[pos_]) + "'");
      return false;
    }
    advance();
    return true;
  }

  static std::string printable(char c) {
    if (c >= 32 && c < 127) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
    return buf;
  }

  bool readAttributes(XmlElement* elem, bool* selfClosing) {
    while (true) {
      skipSpaces();
      if (pos_ >= text_.size()) {
        fail(elem->line, "unexpected end of file inside <" + elem->name + ">");
        return false;
      }
      char c = text_[pos_];
      if (c == '>') {
        advance();
        return true;
      }
      if (c == '/') {
        advance();
        if (!expect('>')) return false;
        *selfClosing = true;
        return true;
      }
      int attrLine = line_;
      std::string key = readName();
      if (key.empty()) {
        fail(attrLine, "unexpected '" + printable(c) + "' in <" + elem->name + ">");
        return false;
      }
      skipSpaces();
      if (!expect('=')) return false;
      skipSpaces();
      if (pos_ >= text_.size() || (text_[pos_] != '"' && text_[pos_] != '\'')) {
        fail(line_, "attribute " + key + " of <" + elem->name + "> has no quoted value");
        return false;
      }
      char quote = text_[pos_];
      advance();
      std::string raw;
      while (pos_ < text_.size() && text_[pos_] != quote) {
        if (text_[pos_] == '<') {
          fail(line_, "'<' inside the value of attribute " + key);
          return false;
        }
        if (raw.size() >= limits_.maxValueLength) {
          fail(attrLine, "value of attribute " + key + " is longer than " + std::to_string(limits_.maxValueLength));
          return false;
        }
        raw.push_back(text_[pos_]);
        advance();
      }
      if (pos_ >= text_.size()) {
        fail(attrLine, "unexpected end of file inside the value of attribute " + key);
        return false;
      }
      advance();  // closing quote
      if (elem->attr(key)) {
        fail(attrLine, "attribute " + key + " appears twice in <" + elem->name + ">");
        return false;
      }
      if (elem->attrs.size() >= limits_.maxAttributes) {
        fail(attrLine, "more than " + std::to_string(limits_.maxAttributes) + " attributes in <" + elem->name + ">");
        return false;
      }
      std::string value;
      if (!decodeEntities(raw, &value)) {
        fail(attrLine, "bad character reference in attribute " + key + ": \"" + raw + "\"");
        return false;
      }
      elem->attrs.emplace_back(std::move(key), std::move(value));
    }
  }

  static bool decodeEntities(const std::string& raw, std::string* out) {
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out->push_back(raw[i]);
        continue;
      }
      size_t semi = raw.find(';', i);
      if (semi == std::string::npos || semi - i > 8) return false;
      std::string_view ent(raw.data() + i + 1, semi - i - 1);
      if (ent == "amp") out->push_back('&');
      else if (ent == "lt") out->push_back('<');
      else if (ent == "gt") out->push_back('>');
      else if (ent == "quot") out->push_back('"');
      else if (ent == "apos") out->push_back('\'');
      else if (ent.size() >= 2 && ent[0] == '#') {
        unsigned long code = 0;
        bool hex = ent[1] == 'x' || ent[1] == 'X';
        size_t j = hex ? 2 : 1;
        if (j >= ent.size()) return false;
        for (; j < ent.size(); ++j) {
          char d = ent[j];
          int v = (d >= '0' && d <= '9') ? d - '0'
                  : hex && d >= 'a' && d <= 'f' ? d - 'a' + 10
                  : hex && d >= 'A' && d <= 'F' ? d - 'A' + 10
                                                : -1;
          if (v < 0) return false;
          code = code * (hex ? 16 : 10) + static_cast<unsigned long>(v);
        }
        if (code == 0 || code > 127) return false;  // topology files are ASCII
        out->push_back(static_cast<char>(code));
      } else {
        return false;
      }
      i = semi;
    }
    return true;
  }

  std::string_view text_;
  const std::string& source_;
  const XmlLimits& limits_;
  size_t pos_ = 0;
  int line_ = 1;
  std::string error_;
};

void escapeInto(const std::string& v, std::string* out) {
  for (char c : v) {
    switch (c) {
      case '&': *out += "&amp;"; break;
      case '<': *out += "&lt;"; break;
      case '>': *out += "&gt;"; break;
      case '"': *out += "&quot;"; break;
      default: out->push_back(c);
    }
  }
}

void writeElement(const XmlElement& e, int depth, std::string* out) {
  out->append(static_cast<size_t>(depth) * 2, ' ');
  *out += '<';
  *out += e.name;
  for (const auto& [k, v] : e.attrs) {
    *out += ' ';
    *out += k;
    *out += "=\"";
    escapeInto(v, out);
    *out += '"';
  }
  if (e.children.empty()) {
    *out += "/>\n";
    return;
  }
  *out += ">\n";
  for (const auto& c : e.children) writeElement(c, depth + 1, out);
  out->append(static_cast<size_t>(depth) * 2, ' ');
  *out += "</";
  *out += e.name;
  *out += ">\n";
}

}  // namespace

bool parseXml(std::string_view text, const std::string& source, XmlElement* root, std::string* error,
              const XmlLimits& limits) {
  if (text.size() > limits.maxBytes) {
    *error = source + ": file is larger than " + std::to_string(limits.maxBytes) + " bytes";
    return false;
  }
  Parser p(text, source, limits);
  return p.run(root, error);
}

bool parseXmlFile(const std::string& path, XmlElement* root, std::string* error, const XmlLimits& limits) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::string text;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = path + ": read failed: " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > limits.maxBytes) {
      *error = path + ": file is larger than " + std::to_string(limits.maxBytes) + " bytes";
      ::close(fd);
      return false;
    }
  }
  if (::close(fd) != 0) {
    *error = path + ": close failed: " + std::strerror(errno);
    return false;
  }
  return parseXml(text, path, root, error, limits);
}

std::string writeXml(const XmlElement& root) {
  std::string out;
  writeElement(root, 0, &out);
  return out;
}

bool writeXmlFile(const std::string& path, const XmlElement& root, std::string* error) {
  std::string text = writeXml(root);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = tmp + ": cannot create: " + std::strerror(errno);
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = tmp + ": write failed: " + std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    *error = tmp + ": close failed: " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = path + ": rename from " + tmp + " failed: " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace braid::topo
