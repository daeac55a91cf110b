// The report for people: the inventory's sections in order (versions, GPUs, topology, P2P, IOMMU,
// MPS, network, storage), then the measurements, each figure as `path  best unit  expected (why)
// verdict`; then what was skipped and why, and where the doctor's time went.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "report.h"

namespace braid::doctor {

namespace {

const char* const kFactSections[] = {"versions", "gpus", "topology", "p2p", "iommu", "mps", "network", "storage"};
const char* const kFigureSections[] = {"copies", "p2p", "ipc", "collectives", "storage"};

// Rows printed with every column as wide as its widest cell (up to `cap`), two spaces apart.
void printTable(FILE* out, const std::vector<std::vector<std::string>>& rows, size_t cap = 60) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], std::min(cap, row[c].size()));
    }
  for (const auto& row : rows) {
    std::string line = "  ";
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(std::max<size_t>(2, width[c] + 2 - std::min(width[c], row[c].size())), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::fprintf(out, "%s\n", line.c_str());
  }
}

std::string verdictCell(Severity s, const std::string& verdict) {
  if (s == Severity::Ok) return verdict;
  std::string tag = s == Severity::Warning ? "WARNING" : "ERROR";
  return verdict.empty() ? tag : tag + ": " + verdict;
}

std::string number(double v) {
  if (!std::isfinite(v)) return "n/a";
  char b[32];
  std::snprintf(b, sizeof b, std::fabs(v) >= 100 ? "%.0f" : std::fabs(v) >= 10 ? "%.1f" : "%.2f", v);
  return b;
}

std::string blockSection(const Block& b) { return b.title.rfind("P2P", 0) == 0 ? "p2p" : "topology"; }

void printBlock(FILE* out, const Block& b) {
  std::fprintf(out, "  -- %s\n", b.title.c_str());
  size_t start = 0;
  while (start < b.text.size()) {
    size_t nl = b.text.find('\n', start);
    if (nl == std::string::npos) nl = b.text.size();
    std::fprintf(out, "  %s\n", b.text.substr(start, nl - start).c_str());
    start = nl + 1;
  }
}

void printFacts(FILE* out, const Report& r, const std::string& section) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : r.facts)
    if (f.section == section) rows.push_back({f.name, f.value, verdictCell(f.severity, f.verdict)});
  bool blocks = false;
  for (const auto& b : r.blocks) blocks |= blockSection(b) == section;
  if (rows.empty() && !blocks) return;
  std::fprintf(out, "\n== %s\n", section.c_str());
  printTable(out, rows);
  for (const auto& b : r.blocks)
    if (blockSection(b) == section) printBlock(out, b);
}

void printFigures(FILE* out, const Report& r, const std::string& section) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : r.figures) {
    if (f.section != section) continue;
    if (rows.empty()) rows.push_back({"path", "best", "expected (why)", "verdict"});
    std::string expected = f.expected > 0 ? number(f.expected) + " " + f.unit : "?";
    if (!f.expectedWhy.empty()) expected += " (" + f.expectedWhy + ")";
    rows.push_back({f.path, number(f.best) + " " + f.unit, expected, verdictCell(f.severity, f.verdict)});
  }
  if (rows.empty()) return;
  std::fprintf(out, "\n== measured: %s\n", section.c_str());
  printTable(out, rows, 70);
}

}  // namespace

void printText(const Report& r, const RunInfo& run, FILE* out) {
  std::fprintf(out, "braid-doctor %s%s\n", run.braidVersion.c_str(), run.quick ? " (--quick)" : "");
  std::set<std::string> known(std::begin(kFactSections), std::end(kFactSections));
  for (const char* s : kFactSections) printFacts(out, r, s);
  std::set<std::string> others;  // sections a part added beyond the usual ones ("doctor", ...)
  for (const auto& f : r.facts)
    if (!known.count(f.section)) others.insert(f.section);
  for (const auto& s : others) printFacts(out, r, s);

  std::set<std::string> figureKnown(std::begin(kFigureSections), std::end(kFigureSections));
  for (const char* s : kFigureSections) printFigures(out, r, s);
  std::set<std::string> figureOthers;
  for (const auto& f : r.figures)
    if (!figureKnown.count(f.section)) figureOthers.insert(f.section);
  for (const auto& s : figureOthers) printFigures(out, r, s);

  if (!r.skipped.empty()) {
    std::fprintf(out, "\n== skipped\n");
    std::vector<std::vector<std::string>> rows;
    for (const auto& s : r.skipped) rows.push_back({s.part, s.reason});
    printTable(out, rows);
  }
  std::fprintf(out, "\n== run time\n");
  std::vector<std::vector<std::string>> rows{{"part", "seconds", "budget"}};
  for (const auto& p : run.parts)
    rows.push_back({p.name, p.ran ? number(p.seconds) : "skipped", p.budget > 0 ? number(p.budget) : "-"});
  printTable(out, rows);
  Severity w = worstSeverity(r);
  int warnings = 0, errors = 0;
  for (const auto& f : r.facts) (f.severity == Severity::Warning ? warnings : errors) += f.severity != Severity::Ok;
  for (const auto& f : r.figures) (f.severity == Severity::Warning ? warnings : errors) += f.severity != Severity::Ok;
  std::fprintf(out, "\nbraid-doctor took %.2f s: %s (%d warning%s, %d error%s, %zu skipped; exit %d)\n", r.seconds,
               severityName(w), warnings, warnings == 1 ? "" : "s", errors, errors == 1 ? "" : "s", r.skipped.size(),
               exitCodeFor(w));
}

}  // namespace braid::doctor
