// One small JSON reader for braid's tools (braid-perf's --plot-compare, braid-doctor reading
// braid-perf's report, the doctor's schema test): strict RFC 8259 (grammar, escapes, UTF-8),
// nesting bounded, object members in order. Not a writer.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace braid::json {

struct Value {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  bool boolean = false;
  double number = 0;
  std::string text;                                    // String
  std::vector<Value> items;                            // Array
  std::vector<std::pair<std::string, Value>> members;  // Object, in order (a repeated key: the first wins)
  // The member `key` of an object; nullptr when absent or not an object.
  const Value* find(const std::string& key) const;
  double numberOr(double otherwise) const { return type == Number ? number : otherwise; }
};

// False with *error ("offset N: ...") when `text` is not one valid JSON value.
bool parse(const std::string& text, Value* out, std::string* error);

}  // namespace braid::json
