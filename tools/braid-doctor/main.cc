// braid-doctor: one bounded command that says where this machine's GPU communication goes and
// whether each link runs as fast as it should. Runs the inventory parts, then the measurements,
// each within a time budget, prints the report and writes JSON and a plot on request.
// Exit status: 0 healthy, 1 a warning, 2 an error (or a bad command line).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "braid/version.h"
#include "cli.h"
#include "host_files.h"
#include "inventory.h"
#include "measure.h"
#include "report.h"
#include "subprocess.h"

namespace {

using namespace braid::doctor;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Step {
  std::string name;     // as --skip names it
  std::string label;    // in the run-time table
  bool measurement;
  double budgetQuick, budgetFull;  // inventory: seconds; measurement: share of what is left
  std::function<void(double budget)> run;
};

// braid-perf beside the doctor in the build tree (tools/braid-doctor -> perf), installed next
// to it, or in PATH.
std::string findBraidPerf(const std::string& self) {
  std::string dir = self.substr(0, self.rfind('/'));
  for (const std::string& c : {dir + "/../../perf/braid-perf", dir + "/braid-perf"})
    if (::access(c.c_str(), X_OK) == 0) return realPath(c);
  return findProgram("braid-perf");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--ipc-child") == 0) return ipcChildMain(argc, argv);
  if (argc > 1 && std::strcmp(argv[1], "--gds-probe") == 0) return gdsProbeMain();
  auto start = Clock::now();
  CliOptions cli;
  std::string error;
  if (!parseCli(argc, argv, &cli, &error)) {
    std::fprintf(stderr, "braid-doctor: %s\n", error.c_str());
    printUsage(stderr);
    return 2;
  }
  if (cli.help) {
    printUsage(stdout);
    return 0;
  }
  const double total = cli.quick ? 10.0 : 60.0;  // the promise: --quick under 10 s, a full run under 60 s
  const double reserve = cli.quick ? 1.0 : 3.0;   // for the report, the plot and exiting

  Report report;
  RunInfo run;
  run.quick = cli.quick;
  run.braidVersion = BRAID_VERSION_STRING;
  InventoryFindings found;
  std::string self = realPath("/proc/self/exe");
  InventoryOptions inv;
  inv.quick = cli.quick;
  inv.selfPath = self;
  MeasureOptions mo;
  mo.quick = cli.quick;
  mo.selfPath = self;
  mo.braidPerf = findBraidPerf(self);
  mo.skip = cli.skip;

  if (std::find(cli.skip.begin(), cli.skip.end(), "gpus") != cli.skip.end())
    found.noGpuReason = "the GPUs were not looked at (--skip gpus)";

  auto inventory = [&](void (*fn)(const InventoryOptions&, Report*, InventoryFindings*)) {
    return [&, fn](double budget) {
      inv.budgetSeconds = budget;
      fn(inv, &report, &found);
    };
  };
  auto measure = [&](void (*fn)(const MeasureOptions&, Report*)) {
    return [&, fn](double budget) {
      mo.budgetSeconds = budget;
      mo.realNccl = found.realNccl;
      fn(mo, &report);
    };
  };
  std::vector<Step> steps = {
      {"versions", "versions", false, 2, 5, inventory(inventoryVersions)},
      {"gpus", "gpus, topology, P2P", false, 2, 5, inventory(inventoryGpus)},
      {"iommu", "iommu/ACS", false, 1.5, 5, inventory(inventoryIommu)},
      {"mps", "mps", false, 0.5, 1, inventory(inventoryMps)},
      {"network", "network", false, 1.5, 5, inventory(inventoryNetwork)},
      {"storage", "storage (GDS)", false, 1.5, 10, inventory(inventoryStorage)},
      {"copies", "copies", true, 0.15, 0.15, measure(measureCopies)},
      {"peers", "peers", true, 0.25, 0.25, measure(measurePeers)},
      {"ipc", "ipc", true, 0.15, 0.15, measure(measureIpc)},
      {"collectives", "collectives", true, 0.3, 0.3, measure(measureCollectives)},
      {"storage", "storage reads", true, 0.15, 0.15, measure(measureStorage)},
  };

  // A measurement's budget is its share of what is left, among the measurements still to run:
  // time a part did not use (one GPU: no peers) goes to the ones after it.
  auto isSkipped = [&](const Step& s) { return std::find(cli.skip.begin(), cli.skip.end(), s.name) != cli.skip.end(); };
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    PartTime pt{s.label, 0, 0, false};
    bool skipped = isSkipped(s);
    double left = std::max(0.0, total - reserve - since(start));
    double sharesLeft = 0;
    for (size_t j = i; j < steps.size(); ++j)
      if (steps[j].measurement && !isSkipped(steps[j])) sharesLeft += steps[j].budgetFull;
    double budget = s.measurement ? (sharesLeft > 0 ? left * s.budgetFull / sharesLeft : 0)
                                  : (cli.quick ? s.budgetQuick : s.budgetFull);
    budget = std::min(budget, left);
    pt.budget = std::max(0.0, budget);
    if (skipped) {
      addSkip(&report, s.label, "--skip " + s.name);
    } else if (s.measurement && found.cudaDevices == 0) {
      addSkip(&report, s.label, found.noGpuReason);
    } else if (budget < 0.2) {
      addSkip(&report, s.label, "no time left in the doctor's " + std::to_string(static_cast<int>(total)) + " s budget");
    } else {
      auto t0 = Clock::now();
      s.run(budget);
      pt.seconds = since(t0);
      pt.ran = true;
      if (pt.seconds > budget + std::max(1.0, 0.25 * budget))
        addFact(&report, "doctor", s.label + " time", std::to_string(pt.seconds).substr(0, 5) + " s", Severity::Warning,
                "over its " + std::to_string(budget).substr(0, 4) + " s budget: a part is not keeping to its bound");
    }
    run.parts.push_back(pt);
  }

  if (!cli.plotPath.empty()) {
    std::string perr;
    if (!writePlot(report, cli.plotPath, &perr)) addFact(&report, "doctor", "plot", perr, Severity::Error, "--plot failed");
    else addFact(&report, "doctor", "plot", cli.plotPath + " written");
  }
  report.seconds = since(start);
  printText(report, run, stdout);
  std::fflush(stdout);
  int code = exitCodeFor(worstSeverity(report));
  if (!cli.jsonPath.empty()) {
    std::string jerr;
    if (!writeTextFile(cli.jsonPath, reportJson(report, run), &jerr)) {
      std::fprintf(stderr, "braid-doctor: --json: %s\n", jerr.c_str());
      code = 2;
    }
  }
  return code;
}
