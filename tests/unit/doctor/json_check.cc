#include "json_check.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace braid::doctor::test {

namespace {

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
