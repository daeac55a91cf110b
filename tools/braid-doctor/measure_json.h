// A small JSON reader for braid-perf's --json report: values, arrays, objects, strings with
// escapes (\uXXXX to UTF-8), nesting bounded. Not a general validator.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace braid::doctor::measure {

struct Json {
  enum class Type { Null, Bool, Number, String, Array, Object };
  Type type = Type::Null;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;                             // Array
  std::vector<std::pair<std::string, Json>> members;  // Object, in order
  // The member `key` of an object; nullptr when absent or not an object.
  const Json* get(const std::string& key) const;
  double numberOr(double otherwise) const { return type == Type::Number ? number : otherwise; }
};

// False with the offset and reason in *why when `text` is not one JSON value.
bool parseJson(const std::string& text, Json* out, std::string* why);

}  // namespace braid::doctor::measure
