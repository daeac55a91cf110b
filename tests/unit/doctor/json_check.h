// A validator for the subset of
// JSON Schema that docs/doctor.schema.json uses: type, properties, required, items, enum,
// additionalProperties. Keywords outside the subset are reported, so a schema that grows past
// it fails the test instead of passing unchecked.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "tools/json/json.h"

namespace braid::doctor::test {

using Json = json::Value;  // tools/json: the tools' one JSON reader
inline bool parseJson(const std::string& text, Json* out, std::string* error) { return json::parse(text, out, error); }
// Every place `value` breaks `schema` ("$.facts[3].severity: ..."); empty when it conforms.
std::vector<std::string> validate(const Json& value, const Json& schema);
// Schema properties without a "description" string ("$.properties.parts"), for the docs rule.
std::vector<std::string> undocumented(const Json& schema);

}  // namespace braid::doctor::test
