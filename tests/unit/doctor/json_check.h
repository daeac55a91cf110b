// A strict JSON reader (RFC 8259: grammar, escapes, UTF-8) and a validator for the subset of
// JSON Schema that docs/doctor.schema.json uses: type, properties, required, items, enum,
// additionalProperties. Keywords outside the subset are reported, so a schema that grows past
// it fails the test instead of passing unchecked.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace braid::doctor::test {

struct Json {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  bool boolean = false;
  double number = 0;
  std::string text;  // String
  std::vector<Json> items;  // Array
  std::vector<std::pair<std::string, Json>> members;  // Object, in order
  const Json* find(const std::string& key) const;
};

// False with *error ("offset N: ...") when `text` is not one valid JSON value.
bool parseJson(const std::string& text, Json* out, std::string* error);
// Every place `value` breaks `schema` ("$.facts[3].severity: ..."); empty when it conforms.
std::vector<std::string> validate(const Json& value, const Json& schema);
// Schema properties without a "description" string ("$.properties.parts"), for the docs rule.
std::vector<std::string> undocumented(const Json& schema);

}  // namespace braid::doctor::test
