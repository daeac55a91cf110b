// A small XML reader and writer, enough for NCCL's topology and graph files.
//
// It keeps elements, attributes (in file order) and the line each element starts on. Text
// content is ignored. Comments, the <?xml?> declaration and <!DOCTYPE> are skipped. Limits on
// depth, element count and value length keep a hostile file from exhausting memory or stack.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace braid::topo {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // file order
  std::vector<XmlElement> children;
  int line = 0;  // 1-based line of the '<' that opens the element; 0 when built in memory

  const std::string* attr(std::string_view key) const;
  std::string attrOr(std::string_view key, std::string_view fallback) const;
  // Replaces the value when the attribute exists, otherwise appends it.
  void setAttr(std::string_view key, std::string value);
  void removeAttr(std::string_view key);
  XmlElement& addChild(std::string childName);
  // Number of elements in this subtree, this one included.
  size_t countElements() const;
};

struct XmlLimits {
  size_t maxBytes = 64u << 20;
  int maxDepth = 64;
  size_t maxElements = 200000;
  size_t maxValueLength = 4096;
  size_t maxAttributes = 64;
};

// Parses `text`. On failure returns false and sets `error` to "<source>:<line>: <what>".
// `source` only names the input in messages (a file name, or "<string>").
bool parseXml(std::string_view text, const std::string& source, XmlElement* root, std::string* error,
              const XmlLimits& limits = {});
// Reads and parses a file; errors name the file (and the line when the content is at fault).
bool parseXmlFile(const std::string& path, XmlElement* root, std::string* error,
                  const XmlLimits& limits = {});

// Writes `root` in NCCL's layout: two-space indentation, `<tag a="v"/>` for leaves, a final newline.
std::string writeXml(const XmlElement& root);
// Writes to `path` atomically enough for a dump (write then rename). Returns false with `error` set.
bool writeXmlFile(const std::string& path, const XmlElement& root, std::string* error);

}  // namespace braid::topo
