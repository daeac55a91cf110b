// The report's outputs: text for people, JSON for programs (docs/doctor.schema.json), a PNG of
// bandwidth against size; and the helpers every part uses to add to it.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "figure.h"

namespace braid::doctor {

// How one part of the run went: its time against its budget.
struct PartTime {
  std::string name;
  double seconds = 0;
  double budget = 0;
  bool ran = false;   // false: skipped (--skip, or no GPU)
};

// What the outputs say about the run besides the report itself.
struct RunInfo {
  bool quick = false;
  std::string braidVersion;
  std::vector<PartTime> parts;
};

void addFact(Report* r, std::string section, std::string name, std::string value, Severity severity = Severity::Ok,
             std::string verdict = {});
void addSkip(Report* r, std::string part, std::string reason);
// The worst severity among facts and figures.
Severity worstSeverity(const Report& r);
// 0 healthy, 1 any warning, 2 any error.
int exitCodeFor(Severity s);
const char* severityName(Severity s);  // "ok", "warning", "error"

void printText(const Report& r, const RunInfo& run, FILE* out);

// JSON of the report (one object, UTF-8, valid whatever bytes the strings hold).
std::string reportJson(const Report& r, const RunInfo& run);
// A JSON string literal: quotes, backslashes and control characters escaped; bytes that are no
// valid UTF-8 become U+FFFD so that the output is always valid UTF-8.
std::string jsonString(std::string_view s);
bool writeTextFile(const std::string& path, const std::string& text, std::string* error);

// False, with *error, when the picture cannot be written (or the plot library is not built).
bool writePlot(const Report& r, const std::string& path, std::string* error);

}  // namespace braid::doctor
