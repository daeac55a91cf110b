// The helpers every part uses to add to the report, and the run's overall verdict.
#include "report.h"

#include <algorithm>

namespace braid::doctor {

void addFact(Report* r, std::string section, std::string name, std::string value, Severity severity,
             std::string verdict) {
  r->facts.push_back({std::move(section), std::move(name), std::move(value), severity, std::move(verdict)});
}

void addSkip(Report* r, std::string part, std::string reason) { r->skipped.push_back({std::move(part), std::move(reason)}); }

Severity worstSeverity(const Report& r) {
  Severity w = Severity::Ok;
  for (const auto& f : r.facts) w = std::max(w, f.severity);
  for (const auto& f : r.figures) w = std::max(w, f.severity);
  return w;
}

int exitCodeFor(Severity s) { return static_cast<int>(s); }

const char* severityName(Severity s) {
  switch (s) {
    case Severity::Ok: return "ok";
    case Severity::Warning: return "warning";
    case Severity::Error: return "error";
  }
  return "error";
}

}  // namespace braid::doctor
