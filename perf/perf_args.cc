#include "perf/perf_args.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

namespace braid::perf {
namespace {

using check::ReduceOp;

// A flag: its short letter(s) and long name; whether -i was seen matters for -f's default.
struct FlagSpec {
  std::string shortName;  // "b", "np"
  std::string longName;   // "minbytes"
  bool takesValue = true;
};

const std::vector<FlagSpec>& flagSpecs() {
  static const std::vector<FlagSpec> specs = {
      {"b", "minbytes"}, {"e", "maxbytes"}, {"f", "stepfactor"}, {"i", "stepbytes"}, {"n", "iters"},
      {"w", "warmup_iters"}, {"m", "agg_iters"}, {"c", "check"}, {"o", "op"}, {"d", "datatype"},
      {"r", "root"}, {"z", "blocking"}, {"y", "stream_null"}, {"T", "timeout"}, {"G", "cudagraph"},
      {"C", "report_cputime"}, {"a", "average"}, {"t", "nthreads"}, {"g", "ngpus"}, {"p", "parallel_init"},
      {"np", "np"}, {"", "ranks"}, {"", "coll"}, {"", "memory"}, {"", "json"}, {"", "plot"}, {"", "plot-compare"}, {"", "poll"},
      {"h", "help", false}};
  return specs;
}

bool parseInt(std::string_view text, long lo, long hi, long* out) {
  std::string s(text);
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(s.c_str(), &end, 0);
  if (errno != 0 || *end != '\0' || value < lo || value > hi) return false;
  *out = value;
  return true;
}

template <typename T>
std::optional<std::string> intFlag(std::string_view text, long lo, long hi, const char* what, T* out) {
  long value;
  if (!parseInt(text, lo, hi, &value))
    return std::string(what) + " wants an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" +
           std::string(text) + "'";
  *out = static_cast<T>(value);
  return std::nullopt;
}

std::optional<std::string> applyFlag(const std::string& name, const std::string& value, PerfOptions& o,
                                     bool& stepBytesGiven, bool& stepFactorGiven) {
  constexpr long kIntMax = 1L << 30;
  if (name == "minbytes" || name == "maxbytes") {
    size_t bytes;
    if (!parseSize(value, &bytes)) return "invalid size '" + value + "' for " + name;
    (name == "minbytes" ? o.minBytes : o.maxBytes) = bytes;
  } else if (name == "stepfactor") {
    stepFactorGiven = true;
    return intFlag(value, 1, kIntMax, "-f", &o.stepFactor);
  } else if (name == "stepbytes") {
    stepBytesGiven = true;
    if (!parseSize(value, &o.stepBytes)) return "invalid size '" + value + "' for -i";
  } else if (name == "iters") {
    return intFlag(value, 1, kIntMax, "-n", &o.iters);
  } else if (name == "warmup_iters") {
    return intFlag(value, 0, kIntMax, "-w", &o.warmupIters);
  } else if (name == "agg_iters") {
    return intFlag(value, 1, 1024, "-m", &o.aggIters);
  } else if (name == "check") {
    return intFlag(value, 0, 1000, "-c", &o.checkIters);
  } else if (name == "op") {
    o.ops.clear();
    if (value == "all") {
      o.ops.assign(std::begin(check::kAllReduceOps), std::end(check::kAllReduceOps));
    } else {
      ReduceOp op;
      if (!check::parseOp(value, &op) || op == ReduceOp::None)
        return "unknown op '" + value + "' (sum, prod, max, min, avg, premulsum, all)";
      o.ops.push_back(op);
    }
  } else if (name == "datatype") {
    o.types.clear();
    if (value == "all") {
      o.types.assign(std::begin(check::kAllTypes), std::end(check::kAllTypes));
    } else {
      ncclDataType_t type;
      if (!check::parseType(value, &type))
        return "unknown datatype '" + value +
               "' (int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2, all)";
      o.types.push_back(type);
    }
  } else if (name == "root") {
    return intFlag(value, 0, kIntMax, "-r", &o.root);
  } else if (name == "blocking") {
    return intFlag(value, 0, 1, "-z", &o.blocking);
  } else if (name == "poll") {
    return intFlag(value, 0, 1, "--poll", &o.poll);
  } else if (name == "stream_null") {
    return intFlag(value, 0, 1, "-y", &o.streamNull);
  } else if (name == "timeout") {
    return intFlag(value, 0, kIntMax, "-T", &o.timeoutSeconds);
  } else if (name == "cudagraph") {
    return intFlag(value, 0, kIntMax, "-G", &o.graphLaunches);
  } else if (name == "report_cputime") {
    return intFlag(value, 0, 1, "-C", &o.reportCpuTime);
  } else if (name == "average") {
    return intFlag(value, 0, 3, "-a", &o.average);
  } else if (name == "nthreads" || name == "ngpus") {
    int n;
    if (auto error = intFlag(value, 1, 1, name == "nthreads" ? "-t" : "-g", &n))
      return *error + ": braid-perf runs one rank per process or thread; use -np N (and --ranks) or mpirun for more ranks";
  } else if (name == "parallel_init") {
    int ignored;
    return intFlag(value, 0, 1, "-p", &ignored);  // one rank per process: always "parallel"
  } else if (name == "np") {
    return intFlag(value, 1, 1024, "-np", &o.launchRanks);
  } else if (name == "coll") {
    if (!check::parseCollective(value, &o.coll))
      return "unknown collective '" + value +
             "' (allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter, sendrecv)";
  } else if (name == "memory") {
    if (value == "host")
      o.memory = MemoryKind::Host;
    else if (value == "device")
      o.memory = MemoryKind::Device;
    else
      return "--memory wants host or device, got '" + value + "'";
  } else if (name == "ranks") {
    if (value == "threads")
      o.ranksAs = RanksAs::Threads;
    else if (value == "processes")
      o.ranksAs = RanksAs::Processes;
    else
      return "--ranks wants threads or processes, got '" + value + "'";
  } else if (name == "plot") {
    if (value.empty()) return "--plot wants a file name (FILE.png)";
    o.plotPath = value;
  } else if (name == "plot-compare") {
    if (value.empty()) return "--plot-compare wants a JSON report (braid-perf --json)";
    o.plotComparePath = value;
  } else if (name == "json") {
    if (value.empty()) return "--json wants a file name";
    o.jsonPath = value;
  } else if (name == "help") {
    o.help = true;
  }
  return std::nullopt;
}

}  // namespace

bool parseSize(std::string_view text, size_t* bytes) {
  std::string s(text);
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || !(value >= 0)) return false;
  double unit = 1;
  std::string suffix(end);
  if (suffix == "K" || suffix == "k")
    unit = 1024.0;
  else if (suffix == "M" || suffix == "m")
    unit = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    unit = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    return false;
  double total = value * unit;
  if (total > 1e18) return false;
  *bytes = static_cast<size_t>(total);
  return true;
}

ParseResult parseArgs(const std::vector<std::string>& args) {
  ParseResult result;
  PerfOptions& o = result.options;
  bool stepBytesGiven = false, stepFactorGiven = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const FlagSpec* spec = nullptr;
    std::optional<std::string> inlineValue;
    if (arg.rfind("--", 0) == 0) {  // --name or --name=value
      std::string body = arg.substr(2);
      size_t eq = body.find('=');
      std::string name = body.substr(0, eq);
      if (eq != std::string::npos) inlineValue = body.substr(eq + 1);
      for (const auto& s : flagSpecs())
        if (s.longName == name) spec = &s;
    } else if (arg.size() >= 2 && arg[0] == '-') {  // -np, -b, or -bVALUE
      std::string body = arg.substr(1);
      for (const auto& s : flagSpecs())
        if (!s.shortName.empty() && s.shortName == body) spec = &s;
      if (spec == nullptr)
        for (const auto& s : flagSpecs())
          if (s.shortName.size() == 1 && s.takesValue && body[0] == s.shortName[0]) {
            spec = &s;
            inlineValue = body.substr(1);
          }
    }
    if (spec == nullptr) {
      result.error = "unknown argument '" + arg + "'";
      return result;
    }
    std::string value;
    if (spec->takesValue) {
      if (inlineValue) {
        value = *inlineValue;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        result.error = arg + " needs a value";
        return result;
      }
    }
    if (auto error = applyFlag(spec->longName, value, o, stepBytesGiven, stepFactorGiven)) {
      result.error = *error;
      return result;
    }
    if (spec->longName != "np" && spec->longName != "ranks") {
      o.rankArgs.push_back(arg);
      if (spec->takesValue && !inlineValue) o.rankArgs.push_back(value);
    }
  }
  if (stepBytesGiven && !stepFactorGiven) o.stepFactor = 1;
  if (o.minBytes > o.maxBytes) {
    result.error = "invalid sizes: minbytes " + std::to_string(o.minBytes) + " > maxbytes " + std::to_string(o.maxBytes);
    return result;
  }
  if (o.stepFactor <= 1 && o.stepBytes == 0 && o.minBytes != o.maxBytes) {
    result.error = "-i 0 with -f 1 would never reach maxbytes";
    return result;
  }
  if (!o.plotComparePath.empty() && o.plotPath.empty()) {
    result.error = "--plot-compare " + o.plotComparePath + " needs --plot FILE.png to draw into";
    return result;
  }
  if (o.graphLaunches > 0 && o.memory == MemoryKind::Host) {
    result.error = "-G (CUDA graphs) needs device memory; --memory host cannot be captured";
    return result;
  }
  result.ok = true;
  return result;
}

std::vector<size_t> sizeSteps(const PerfOptions& o) {
  std::vector<size_t> sizes;
  for (size_t size = o.minBytes; size <= o.maxBytes;) {
    sizes.push_back(size);
    size_t next = o.stepFactor > 1 ? (size == 0 ? 1 : size * o.stepFactor) : size + o.stepBytes;
    if (next <= size) break;  // overflow, or a step of 0 with minbytes == maxbytes
    size = next;
  }
  return sizes;
}

const char* ranksAsName(RanksAs how) {
  switch (how) {
    case RanksAs::Threads: return "threads";
    case RanksAs::Processes: return "processes";
    default: return "auto";
  }
}

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Host: return "host";
    case MemoryKind::Device: return "device";
    default: return "auto";
  }
}

std::string usage(const std::string& program) {
  return "usage: " + program +
         " [options]\n"
         "  --coll NAME               allreduce (default), allgather, reducescatter, broadcast, reduce,\n"
         "                            alltoall, gather, scatter, sendrecv\n"
         "  -np N                     start N local ranks (default 4 when not under mpirun)\n"
         "  --ranks threads|processes how to run those ranks (default: threads of this process when\n"
         "                            they use device memory and there are fewer GPUs than ranks, so\n"
         "                            that ranks sharing a GPU need no MPS; else one process per rank)\n"
         "  --memory host|device      buffers (default: device if a GPU is visible, else host)\n"
         "  --json FILE               also write the results as JSON (rank 0)\n"
         "  --plot FILE.png           draw time and bus bandwidth against size, a series per type/op\n"
         "  --plot-compare OTHER.json draw another run's series beside (its --json report; e.g. the\n"
         "                            same program on the real NCCL through LD_LIBRARY_PATH)\n"
         "  -b,--minbytes SIZE        smallest message (default 8; K, M, G suffixes)\n"
         "  -e,--maxbytes SIZE        largest message (default 64M)\n"
         "  -f,--stepfactor N         multiply the size by N each step (default 2)\n"
         "  -i,--stepbytes SIZE       add SIZE each step instead (when -f is 1 or not given)\n"
         "  -n,--iters N              timed iterations per size (default 20)\n"
         "  -w,--warmup_iters N       warm-up iterations, at the largest and smallest size (default 5)\n"
         "  -m,--agg_iters N          collectives per group call (default 1)\n"
         "  -c,--check N              verified runs per size, 0 to skip (default 1)\n"
         "  -o,--op NAME              sum (default), prod, max, min, avg, premulsum (mulsum), all\n"
         "  -d,--datatype NAME        float (default), int8, uint8, int32, uint32, int64, uint64, half,\n"
         "                            double, bfloat16, f8e4m3, f8e5m2, all\n"
         "  -r,--root N               root of broadcast, reduce, gather, scatter (default 0)\n"
         "  -z,--blocking 0|1         wait for completion after each collective (default 0)\n"
         "  -y,--stream_null 0|1      use the default stream (default 0)\n"
         "  --poll 0|1                wait by polling, as nccl-tests does (cudaStreamQuery and\n"
         "                            ncclCommGetAsyncError in a loop), not cudaStreamSynchronize\n"
         "  -G,--cudagraph N          capture the iterations in a CUDA graph, launch it N times\n"
         "  -C,--report_cputime 0|1   report the time until the calls return\n"
         "  -a,--average 0..3         time across ranks: 0 rank 0, 1 mean (default), 2 min, 3 max\n"
         "  -T,--timeout SECONDS      give up after this long (default: never)\n"
         "  -t, -g, -p                accepted for nccl-tests compatibility (-t 1, -g 1 only)\n"
         "Under mpirun (OMPI_COMM_WORLD_* or PMI_* set) each process is one rank. The unique id then\n"
         "comes from ncclGetUniqueId on every rank if NCCL_COMM_ID is set, else from rank 0 through\n"
         "MPI_Bcast of Open MPI's libmpi.so.40, loaded at run time.\n"
         "Exit status: 0 all results right, 1 wrong results, 2 bad usage, 3 a failing call or rank.\n";
}

}  // namespace braid::perf
