// All-reduce through braid and through the real NCCL: braid-perf run twice as a child (one rank
// per GPU, device memory), its --json report read back. The NCCL run finds the real
// libnccl.so.2 through LD_LIBRARY_PATH (braid-perf's run path is a RUNPATH, which
// LD_LIBRARY_PATH overrides); the loader's own log (LD_DEBUG=libs) says which library each
// run really loaded, and when the NCCL run got braid anyway it is repeated with LD_PRELOAD.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "tools/braid-doctor/measure.h"
#include "tools/braid-doctor/measure_child.h"
#include "tools/json/json.h"
#include "tools/braid-doctor/measure_util.h"

namespace braid::doctor {
namespace {
using namespace measure;

struct PerfRun {
  bool ok = false;
  bool outOfTime = false;  // killed at its share of a budget too short to tell a hang (< 10 s)
  std::string error;
  std::map<double, double> bw;  // bytes -> GB/s (busbw; algbw with one rank)
  std::map<double, double> us;  // bytes -> time
  std::vector<std::string> loaded;  // real paths of the libnccl/libbraid the processes initialised
  std::string how;                  // "LD_LIBRARY_PATH=..." or "LD_PRELOAD=..."
  int version = 0;
};

std::string realPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

std::string baseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The NCCL-named libraries the dynamic loader initialised, from LD_DEBUG=libs files "ld.<pid>".
std::vector<std::string> loadedLibraries(const std::string& dir) {
  std::vector<std::string> found;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "ld.", 3) != 0) continue;
    std::ifstream in(dir + "/" + e->d_name);
    std::string line;
    for (int n = 0; n < 200000 && std::getline(in, line); ++n) {
      size_t at = line.find("calling init: ");
      if (at == std::string::npos) continue;
      std::string path = line.substr(at + 14);
      std::string base = baseName(path);
      // libnccl.so* and libbraid*, not NCCL's plugins (libnccl-net.so, libnccl-tuner.so).
      if (base.rfind("libnccl.so", 0) != 0 && base.rfind("libbraid", 0) != 0) continue;
      std::string real = realPath(path);
      bool seen = false;
      for (const auto& f : found) seen = seen || f == real;
      if (!seen) found.push_back(real);
    }
  }
  closedir(d);
  return found;
}

bool readFile(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *text = s.str();
  return true;
}

PerfRun runPerf(const MeasureOptions& opt, int ranks, const std::string& tag, const std::vector<std::string>& env,
                double seconds, const TempDir& dir) {
  PerfRun run;
  const std::string json = dir.path() + "/" + tag + ".json";
  const std::string log = dir.path() + "/" + tag + ".log";
  const std::string ldDir = dir.path() + "/" + tag + "-ld";
  if (mkdir(ldDir.c_str(), 0700) != 0 && errno != EEXIST) {
    run.error = "mkdir " + ldDir + ": " + std::strerror(errno);
    return run;
  }
  SpawnRequest req;
  req.argv = {opt.braidPerf, "-np", std::to_string(ranks), "--memory", "device", "-b", "8",
              "-e", opt.quick ? "1M" : "256M", "-f", "4", "-w", opt.quick ? "2" : "5", "-n", opt.quick ? "5" : "20",
              "-c", "0", "-T", std::to_string(static_cast<int>(seconds) + 1), "--json", json};
  req.setEnv = env;
  req.setEnv.push_back("NCCL_NVLS_ENABLE=0");  // never NVLink multicast
  req.setEnv.push_back("LD_DEBUG=libs");
  req.setEnv.push_back("LD_DEBUG_OUTPUT=" + ldDir + "/ld");
  req.outputPath = log;
  pid_t pid = spawnChild(req, &run.error);
  if (pid < 0) return run;
  ChildEnd end = waitChild(pid, nowSeconds() + seconds);
  run.loaded = loadedLibraries(ldDir);
  // The loader's log files, one per process: removed now (TempDir removes one level only).
  if (DIR* d = opendir(ldDir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') (void)unlink((ldDir + "/" + e->d_name).c_str());
    closedir(d);
  }
  (void)rmdir(ldDir.c_str());
  run.outOfTime = end.killed && seconds < 10;
  if (!end.exited || end.exitCode != 0) {
    run.error = "braid-perf " + end.text + (end.killed ? " (" + fixed(seconds, 0) + " s budget)" : "") + ": " +
                fileTail(log, 400);
    return run;
  }
  std::string text, why;
  json::Value doc;
  if (!readFile(json, &text) || !json::parse(text, &doc, &why)) {
    run.error = "braid-perf's JSON report " + json + ": " + (text.empty() ? "missing" : why);
    return run;
  }
  run.version = static_cast<int>(doc.find("nccl_version") ? doc.find("nccl_version")->numberOr(0) : 0);
  const json::Value* results = doc.find("results");
  for (size_t i = 0; results != nullptr && i < results->items.size(); ++i) {
    const json::Value& row = results->items[i];
    const json::Value* oop = row.find("out_of_place");
    const json::Value* size = row.find("size");
    if (oop == nullptr || size == nullptr) continue;
    const json::Value* bw = oop->find(ranks > 1 ? "bus_bw" : "alg_bw");
    const json::Value* time = oop->find("time");
    if (bw != nullptr) run.bw[size->numberOr(0)] = bw->numberOr(0);
    if (time != nullptr) run.us[size->numberOr(0)] = time->numberOr(0);
  }
  if (run.bw.empty()) {
    run.error = "braid-perf's JSON report has no results";
    return run;
  }
  run.ok = true;
  return run;
}

bool loadedOnly(const PerfRun& run, const std::string& lib) {
  for (const auto& l : run.loaded)
    if (l != lib) return false;
  return !run.loaded.empty();
}

bool loadedBraid(const PerfRun& run) {
  for (const auto& l : run.loaded)
    if (baseName(l).find("braid") != std::string::npos) return true;
  return false;
}

// braid's library beside braid-perf: the build tree (perf/../libbraid.so) or an install
// (bin/../lib/libbraid.so); "" when neither is there.
std::string braidLibraryNear(const std::string& braidPerf) {
  std::string dir = braidPerf.substr(0, braidPerf.rfind('/'));
  for (const std::string& c : {dir + "/../libbraid.so", dir + "/../lib/libbraid.so", dir + "/../lib64/libbraid.so"})
    if (access(c.c_str(), R_OK) == 0) return realPath(c);
  return "";
}

std::string joined(const std::vector<std::string>& list) {
  std::string s;
  for (const auto& l : list) s += (s.empty() ? "" : ", ") + l;
  return s.empty() ? "none seen" : s;
}

Figure bandwidthFigure(const std::string& who, int ranks, const PerfRun& run) {
  Figure f;
  f.section = "collectives";
  f.path = who + " all-reduce " + std::to_string(ranks) + (ranks == 1 ? " GPU" : " GPUs");
  f.unit = "GB/s";
  for (const auto& [bytes, bw] : run.bw) {
    f.points.push_back({bytes, bw});
    f.best = std::max(f.best, bw);
  }
  f.verdict = ranks > 1 ? "bus bandwidth, out of place" : "one rank: algorithm bandwidth (bus bandwidth is 0)";
  return f;
}

Figure latencyFigure(const std::string& who, int ranks, const PerfRun& run) {
  Figure f;
  f.section = "collectives";
  f.path = who + " all-reduce 8 B latency " + std::to_string(ranks) + (ranks == 1 ? " GPU" : " GPUs");
  f.unit = "us";
  if (!run.us.empty()) f.best = run.us.begin()->second;
  f.verdict = "time of the smallest size (" + sizeText(run.us.empty() ? 0 : run.us.begin()->first) + ")";
  return f;
}

void compare(const PerfRun& braid, const PerfRun& nccl, Figure* bw, Figure* lat) {
  bw->expected = 0;
  for (const auto& [bytes, v] : nccl.bw) bw->expected = std::max(bw->expected, v);
  bw->expectedWhy = "the real NCCL's peak on the same GPUs";
  std::vector<std::pair<double, double>> slow;  // ratio, bytes
  for (const auto& [bytes, v] : braid.bw) {
    auto it = nccl.bw.find(bytes);
    if (it != nccl.bw.end() && it->second > 0 && v < 0.8 * it->second) slow.push_back({v / it->second, bytes});
  }
  if (slow.empty()) {
    bw->verdict += "; at least 0.8x NCCL at every size";
  } else {
    std::sort(slow.begin(), slow.end());
    bw->severity = Severity::Warning;
    bw->verdict += "; below 0.8x NCCL at " + std::to_string(slow.size()) + " size(s):";
    for (size_t i = 0; i < slow.size() && i < 4; ++i)
      bw->verdict += " " + sizeText(slow[i].second) + " (" + fixed(slow[i].first, 2) + "x)";
  }
  if (!nccl.us.empty()) {
    lat->expected = nccl.us.begin()->second;
    lat->expectedWhy = "the real NCCL's time at the same size";
    if (lat->best > 1.25 * lat->expected) {
      lat->severity = Severity::Warning;
      lat->verdict += "; " + fixed(lat->best / lat->expected, 2) + "x NCCL's";
    }
  }
}

}  // namespace

void measureCollectives(const MeasureOptions& opt, Report* report) {
  if (skippedByOption(opt, "collectives", report)) return;
  int count = deviceCountOrSkip("collectives", report);
  if (count == 0) return;
  if (opt.braidPerf.empty() || access(opt.braidPerf.c_str(), X_OK) != 0) {
    report->skipped.push_back({"collectives", "braid-perf not found" + (opt.braidPerf.empty() ? std::string() : " at " + opt.braidPerf)});
    return;
  }
  Deadline deadline(opt.budgetSeconds);
  TempDir dir;
  std::string why;
  if (!dir.create(&why)) {
    report->skipped.push_back({"collectives", why});
    return;
  }
  const bool haveNccl = !opt.realNccl.empty();
  // braid first, with half the budget when NCCL runs after it.
  PerfRun braid = runPerf(opt, count, "braid", {}, deadline.left() * (haveNccl ? 0.5 : 1.0), dir);
  braid.how = "braid-perf's run path";
  if (braid.ok && !loadedBraid(braid) && !deadline.passed()) {
    // LD_LIBRARY_PATH comes before a RUNPATH: a real libnccl.so.2 on it wins over braid's.
    const std::string braidLib = braidLibraryNear(opt.braidPerf);
    if (!braidLib.empty()) {
      std::vector<std::string> loadedFirst = braid.loaded;
      braid = runPerf(opt, count, "braid", {"LD_PRELOAD=" + braidLib}, deadline.left() * (haveNccl ? 0.5 : 1.0), dir);
      braid.how = "LD_PRELOAD=" + braidLib + " (LD_LIBRARY_PATH gave " + joined(loadedFirst) + ")";
    }
  }
  if (braid.ok && !loadedBraid(braid)) {
    braid.ok = false;
    braid.error = "braid-perf did not load braid (loaded: " + joined(braid.loaded) +
                  "): LD_LIBRARY_PATH or LD_PRELOAD in the doctor's environment points it elsewhere";
  }
  PerfRun nccl;
  if (!haveNccl) {
    report->skipped.push_back({"NCCL all-reduce", "no real NCCL found"});
  } else {
    const std::string real = realPath(opt.realNccl);
    std::string dirOf = opt.realNccl.substr(0, opt.realNccl.rfind('/'));
    const char* old = std::getenv("LD_LIBRARY_PATH");
    std::string path = "LD_LIBRARY_PATH=" + dirOf + (old && *old ? ":" + std::string(old) : "");
    nccl = runPerf(opt, count, "nccl", {path}, deadline.left(), dir);
    nccl.how = "found through LD_LIBRARY_PATH=" + dirOf;
    if (nccl.ok && !loadedOnly(nccl, real) && !deadline.passed()) {
      // The library path did not win (an RPATH, or braid preloaded): preload the real one.
      nccl = runPerf(opt, count, "nccl", {"LD_PRELOAD=" + opt.realNccl}, deadline.left(), dir);
      nccl.how = "LD_PRELOAD=" + opt.realNccl + " (LD_LIBRARY_PATH gave " + joined(nccl.loaded) + ")";
    }
    if (nccl.ok && !loadedOnly(nccl, real)) {
      nccl.ok = false;
      nccl.error = "braid-perf did not run on the real NCCL " + real + " (loaded: " + joined(nccl.loaded) + ")";
    }
  }
  auto failed = [&](const std::string& who, const PerfRun& run) {
    if (run.outOfTime) {
      report->skipped.push_back({who + " all-reduce", "braid-perf did not finish within its share of the budget: " + run.error});
      return;
    }
    Figure f;
    f.section = "collectives";
    f.path = who + " all-reduce " + std::to_string(count) + (count == 1 ? " GPU" : " GPUs");
    f.unit = "GB/s";
    f.severity = Severity::Error;
    f.verdict = run.error;
    report->figures.push_back(f);
  };
  Figure braidBw = bandwidthFigure("braid", count, braid), braidLat = latencyFigure("braid", count, braid);
  if (braid.ok && nccl.ok) compare(braid, nccl, &braidBw, &braidLat);
  if (braid.ok) {
    braidBw.verdict += "; library " + joined(braid.loaded) + " (" + braid.how + ")";
    report->figures.push_back(braidBw);
    report->figures.push_back(braidLat);
  } else {
    failed("braid", braid);
  }
  if (haveNccl && nccl.ok) {
    Figure bw = bandwidthFigure("NCCL", count, nccl);
    bw.verdict += "; version " + std::to_string(nccl.version) + ", " + nccl.how;
    report->figures.push_back(bw);
    report->figures.push_back(latencyFigure("NCCL", count, nccl));
  } else if (haveNccl) {
    failed("NCCL", nccl);
  }
}

}  // namespace braid::doctor
