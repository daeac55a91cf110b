// Runs each of braid-doctor's measurements and prints what it added to the report, plainly:
// every figure's number, expected value and verdict, its points, the facts, blocks and skips.
//   braid-doctor-measure-selftest [--quick] [--budget S] [--only PART] [--braid-perf PATH] [--real-nccl PATH]
// Exits 0 when it ran (whatever it found), 2 on bad usage. Without a GPU every part is a skip.
// Compiled only for the selftest target (BRAID_DOCTOR_MEASURE_SELFTEST): a glob of measure_*.cc
// into braid-doctor gets an empty file instead of a second main.
#ifdef BRAID_DOCTOR_MEASURE_SELFTEST
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tools/braid-doctor/measure.h"
#include "tools/braid-doctor/measure_util.h"

namespace {
using namespace braid::doctor;

const char* severityName(Severity s) { return s == Severity::Ok ? "ok" : s == Severity::Warning ? "WARNING" : "ERROR"; }

std::string selfPath() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return "";
  path[n] = '\0';
  return path;
}

std::string firstExisting(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates)
    if (!c.empty() && access(c.c_str(), F_OK) == 0) return c;
  return "";
}

void print(const Report& r) {
  for (const auto& f : r.figures) {
    std::printf("[%s] %-12s %-44s %10.3f %-4s expected %s (%s)\n    verdict: %s\n", severityName(f.severity),
                f.section.c_str(), f.path.c_str(), f.best, f.unit.c_str(),
                f.expected > 0 ? braid::doctor::measure::fixed(f.expected, 1).c_str() : "-", f.expectedWhy.c_str(),
                f.verdict.c_str());
    for (const auto& p : f.points)
      std::printf("    %10s  %10.3f %s\n", braid::doctor::measure::sizeText(p.bytes).c_str(), p.value, f.unit.c_str());
  }
  for (const auto& f : r.facts)
    std::printf("fact [%s] %s / %s = %s %s\n", severityName(f.severity), f.section.c_str(), f.name.c_str(),
                f.value.c_str(), f.verdict.c_str());
  for (const auto& b : r.blocks) std::printf("== %s\n%s", b.title.c_str(), b.text.c_str());
  for (const auto& s : r.skipped) std::printf("skipped: %s: %s\n", s.part.c_str(), s.reason.c_str());
}

int usage(const char* me) {
  std::fprintf(stderr,
               "usage: %s [--quick] [--budget SECONDS] [--only copies|p2p|ipc|collectives|storage] "
               "[--braid-perf PATH] [--real-nccl PATH]\n",
               me);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--ipc-child") == 0) return ipcChildMain(argc, argv);
  MeasureOptions opt;
  opt.selfPath = selfPath();
  std::string dir = opt.selfPath.substr(0, opt.selfPath.rfind('/'));
  opt.braidPerf = firstExisting({dir + "/../perf/braid-perf", dir + "/../../perf/braid-perf"});
  const char* lib = std::getenv("BRAID_NCCL_LIBRARY");
  opt.realNccl = firstExisting({lib ? lib : "", "/usr/local/cuda/lib64/libnccl.so.2",
                                "/usr/lib/x86_64-linux-gnu/libnccl.so.2"});
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool hasValue = i + 1 < argc;
    if (a == "--quick") opt.quick = true;
    else if (a == "--budget" && hasValue) opt.budgetSeconds = std::atof(argv[++i]);
    else if (a == "--only" && hasValue) only = argv[++i];
    else if (a == "--braid-perf" && hasValue) opt.braidPerf = argv[++i];
    else if (a == "--real-nccl" && hasValue) opt.realNccl = argv[++i];
    else return usage(argv[0]);
  }
  if (opt.budgetSeconds <= 0 || opt.budgetSeconds > 600) return usage(argv[0]);
  std::printf("self %s\nbraid-perf %s\nreal NCCL %s\nbudget %.0f s per part%s\n", opt.selfPath.c_str(),
              opt.braidPerf.empty() ? "(none)" : opt.braidPerf.c_str(),
              opt.realNccl.empty() ? "(none)" : opt.realNccl.c_str(), opt.budgetSeconds, opt.quick ? ", quick" : "");
  struct Part {
    const char* name;
    void (*run)(const MeasureOptions&, Report*);
  };
  const Part parts[] = {{"copies", measureCopies}, {"p2p", measurePeers}, {"ipc", measureIpc},
                        {"collectives", measureCollectives}, {"storage", measureStorage}};
  Report all;
  for (const Part& p : parts) {
    if (!only.empty() && only != p.name) continue;
    Report r;
    double t0 = braid::doctor::measure::nowSeconds();
    p.run(opt, &r);
    double took = braid::doctor::measure::nowSeconds() - t0;
    std::printf("=== %s (%.2f s)\n", p.name, took);
    print(r);
    std::fflush(stdout);
  }
  return 0;
}
#endif  // BRAID_DOCTOR_MEASURE_SELFTEST
