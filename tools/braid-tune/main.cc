// braid-tune: the tuner's table for a machine, without a GPU. For each size (powers of two from
// --min to --max): the algorithm, protocol, channels, slices per step and estimated time that
// braid's tuner (algo/tuner.h) picks, and the runner-up, on the links the topology XML describes,
// as a communicator of those ranks would see them (api/tuner_inputs.h). NCCL_ALGO, NCCL_PROTO
// and NCCL_P2P_DISABLE count as in the library.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "algo/tuner.h"
#include "algo/tuner_env.h"
#include "api/tuner_inputs.h"
#include "topo/system.h"
#include "topo/topo.h"

namespace {

using namespace braid;

void usage(FILE* f) {
  std::fprintf(f,
               "usage: braid-tune --topo FILE.xml [--coll NAME] [--ranks N] [--ranks-per-gpu K] [--gpus 0,2,...]\n"
               "                  [--min SIZE] [--max SIZE] [--sms S]\n"
               "  --topo FILE       an NCCL topology XML (NCCL_TOPO_FILE format)\n"
               "  --coll NAME       allreduce (default), allgather, reducescatter, broadcast, reduce, alltoall,\n"
               "                    gather, scatter, sendrecv (rank 0 to rank 1)\n"
               "  --ranks N         ranks of the communicator (default: one per GPU)\n"
               "  --ranks-per-gpu K consecutive ranks share a GPU (default: the fewest that fit N ranks)\n"
               "  --gpus LIST       the GPUs (their dev numbers in the file) the ranks take, in this order\n"
               "                    (default: all, in the file's order)\n"
               "  --min, --max      sizes of the whole collective, from min doubling to max (default 8 and 1G;\n"
               "                    K, M, G = 2^10, 2^20, 2^30)\n"
               "  --sms S           SMs per GPU (the XML has none; default 132, an H100/H200 SXM)\n"
               "NCCL_ALGO and NCCL_PROTO constrain the choice as in the library; a bad value exits with 2.\n");
}

bool parseInt(const char* s, long lo, long hi, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// "8", "64K", "1M", "1G", "4GiB", "512KB".
bool parseSize(const char* s, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s || s[0] == '-') return false;
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "KIB") shift = 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB") shift = 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB") shift = 30;
  else return false;
  if (v == 0 || v > (uint64_t{1} << 40) >> shift) return false;  // 1 B .. 1 TiB
  *out = static_cast<uint64_t>(v) << shift;
  return true;
}

bool parseColl(const std::string& name, algo::Coll* out) {
  for (algo::Coll c : algo::tunableCollectives()) {
    std::string n = algo::collName(c);
    if (n.size() == name.size() &&
        std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      *out = c;
      return true;
    }
  }
  return false;
}

std::string choiceText(const algo::TunerChoice& c) {
  return std::string(c.algorithm ? c.algorithm->name : "p2p") + "/" + algo::protocolName(c.protocol);
}

int fail(const std::string& message, int code = 1) {
  std::fprintf(stderr, "braid-tune: %s\n", message.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::string topoFile, collText = "allreduce";
  int nRanks = 0, perGpu = 0, sms = 132;
  uint64_t minBytes = 8, maxBytes = uint64_t{1} << 30;
  std::vector<int> gpuDevs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "braid-tune: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--topo") topoFile = value();
    else if (a == "--coll") collText = value();
    else if (a == "--ranks") {
      if (!parseInt(value(), 1, 4096, &nRanks)) return fail("--ranks takes 1..4096", 2);
    } else if (a == "--ranks-per-gpu") {
      if (!parseInt(value(), 1, 4096, &perGpu)) return fail("--ranks-per-gpu takes 1..4096", 2);
    } else if (a == "--sms") {
      if (!parseInt(value(), 1, 100000, &sms)) return fail("--sms takes a positive count", 2);
    } else if (a == "--gpus") {
      std::string list = value();
      size_t pos = 0;
      while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        int dev = 0;
        if (!parseInt(item.c_str(), 0, 1 << 20, &dev)) return fail("--gpus takes GPU numbers separated by commas (0,2,5), not \"" + list + "\"", 2);
        if (std::find(gpuDevs.begin(), gpuDevs.end(), dev) != gpuDevs.end()) return fail("--gpus names GPU " + item + " twice (use --ranks-per-gpu for several ranks on a GPU)", 2);
        gpuDevs.push_back(dev);
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else if (a == "--min") {
      if (!parseSize(value(), &minBytes)) return fail("--min takes a size of 1 B to 1 TiB (8, 64K, 1M, 1G)", 2);
    } else if (a == "--max") {
      if (!parseSize(value(), &maxBytes)) return fail("--max takes a size of 1 B to 1 TiB (8, 64K, 1M, 1G)", 2);
    }
    else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "braid-tune: unknown argument %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (topoFile.empty()) {
    usage(stderr);
    return fail("--topo FILE.xml is required (an NCCL topology file; braid-topo --dump writes one)", 2);
  }
  algo::Coll coll;
  if (!parseColl(collText, &coll)) return fail("unknown collective \"" + collText + "\" (see --help)", 2);
  if (minBytes > maxBytes) return fail("--min is above --max", 2);

  algo::TuningConstraints constraints;
  std::vector<std::string> notes;
  std::string error;
  const char* ncclAlgo = std::getenv("NCCL_ALGO");
  const char* ncclProto = std::getenv("NCCL_PROTO");
  if (!algo::parseTuningEnv(ncclAlgo, ncclProto, &constraints, &notes, &error)) return fail(error, 2);

  topo::System sys;
  if (!topo::loadSystemFile(topoFile, &sys, &error)) return fail(error);
  // The GPUs the ranks take: the file's, or, for a static file that lists none (NCCL merges it
  // with the machine's GPUs at run time), GPUs the topology does not show.
  struct Gpu {
    std::string busId;
    int dev;
  };
  std::vector<Gpu> gpus;
  int skeletons = 0;
  if (gpuDevs.empty()) {
    for (int g : sys.gpus) {
      gpus.push_back({sys.node(g).busId, sys.node(g).dev});
      skeletons += sys.node(g).skeleton ? 1 : 0;
    }
  } else {
    for (int dev : gpuDevs) {
      const int g = sys.findGpuByDev(dev);
      if (g < 0) return fail("--gpus: the topology has no GPU " + std::to_string(dev) + " (it has " + std::to_string(sys.gpus.size()) + ")");
      gpus.push_back({sys.node(g).busId, dev});
      skeletons += sys.node(g).skeleton ? 1 : 0;
    }
  }
  const bool unknownGpus = gpus.empty();
  if (unknownGpus) {
    if (nRanks == 0) nRanks = 2;
    if (perGpu == 0) perGpu = 1;
    for (int i = 0; i < (nRanks + perGpu - 1) / perGpu; ++i) {
      char busId[32];
      std::snprintf(busId, sizeof(busId), "ffff:%02x:%02x.0", i / 256, i % 256);  // not in the file: unknown hops
      gpus.push_back({busId, i});
    }
  }
  const int nGpus = static_cast<int>(gpus.size());
  if (nRanks == 0) nRanks = nGpus * std::max(1, perGpu);
  if (perGpu == 0) perGpu = (nRanks + nGpus - 1) / nGpus;
  if (static_cast<long>(perGpu) * nGpus < nRanks)
    return fail(std::to_string(nRanks) + " ranks at " + std::to_string(perGpu) + " per GPU need " +
                std::to_string((nRanks + perGpu - 1) / perGpu) + " GPUs; " + std::to_string(nGpus) + " are given");
  if (coll == algo::Coll::SendRecv && nRanks < 2) return fail("sendrecv needs --ranks 2 or more (rank 0 sends to rank 1)");

  // The ranks as a communicator on this machine would place them, and its ring (topo/, as at init).
  const uint64_t host = 1;
  std::vector<api::RankPlace> places;
  std::vector<topo::RankLocation> locations;
  for (int r = 0; r < nRanks; ++r) {
    const Gpu& gpu = gpus[static_cast<size_t>(r / perGpu)];
    places.push_back({host, gpu.busId});
    locations.push_back({r, host, gpu.dev, gpu.busId});
  }
  topo::RingInfo ringInfo;
  std::vector<std::vector<int>> rings = topo::ringOrders(sys, locations, 1, &ringInfo);
  std::vector<int> ring = rings.empty() ? std::vector<int>{} : rings[0];
  const bool p2pDisabled = std::getenv("NCCL_P2P_DISABLE") && std::atoi(std::getenv("NCCL_P2P_DISABLE")) != 0;
  const api::LinkFacts links = api::linkFacts(sys, places, ring, 0, p2pDisabled);

  algo::TunerInput in;
  in.coll = coll;
  in.elemSize = 4;
  in.nRanks = nRanks;
  in.ranksPerGpu = links.ranksPerGpu;
  in.ring = links.ring;
  in.mesh = coll == algo::Coll::SendRecv ? links.toRank[1] : links.mesh;
  in.sms = sms;
  // As the library: NCCL_PROTO chooses among all the executor runs; unset, the defaults. A
  // send/recv is chosen for the one protocol its launch runs (api::deviceTaskProtocols).
  const algo::ProtocolSet protocols = api::deviceProtocols(links, ncclProto != nullptr);
  in.executorProtocols = api::deviceTaskProtocols(coll, constraints, protocols, std::nullopt);
  in.constraints = &constraints;

  struct Row {
    uint64_t bytes;
    algo::TunerResult r;
  };
  std::vector<Row> rows;
  std::vector<std::string> warnings;
  for (uint64_t b = minBytes; b <= maxBytes && rows.size() < 64; b *= 2) {
    in.bytes = b;
    Row row{b, algo::tune(in)};
    if (!row.r.warning.empty() && std::find(warnings.begin(), warnings.end(), row.r.warning) == warnings.end())
      warnings.push_back(row.r.warning);
    rows.push_back(std::move(row));
    if (b > (uint64_t{1} << 62)) break;
  }

  std::printf("# braid-tune: %s, %d rank%s on %d GPU%s (%d per GPU) of %s\n", algo::collName(coll), nRanks,
              nRanks == 1 ? "" : "s", (nRanks + perGpu - 1) / perGpu, (nRanks + perGpu - 1) / perGpu == 1 ? "" : "s",
              links.ranksPerGpu, topoFile.c_str());
  for (const auto& d : sys.diagnostics)
    if (d.level == topo::Diagnostic::Warn) std::printf("# topology warning: %s\n", d.text.c_str());
  if (unknownGpus)
    std::printf("# the file lists no GPU (a static file, which NCCL merges with the machine's GPUs at run time): the "
                "ranks are on GPUs it does not show, their hops taken as PCIe at the tuner's default bandwidth\n");
  else if (skeletons > 0)
    std::printf("# %d GPU%s known only as PCI devices (a static file; their NVLinks come from the machine at run time): "
                "PCIe between them here\n", skeletons, skeletons == 1 ? " is" : "s are");
  std::string order;
  for (int r : ring) order += " " + std::to_string(r);
  if (coll == algo::Coll::SendRecv)
    std::printf("# rank 0 to rank 1: %s; %d SMs per GPU%s\n", api::describeHops(in.mesh).c_str(), sms,
                sms == 132 ? " (assumed; --sms)" : "");
  else
    std::printf("# ring%s: %s; every pair: %s; %d SMs per GPU%s\n", order.c_str(), api::describeHops(links.ring).c_str(),
                api::describeHops(links.mesh).c_str(), sms, sms == 132 ? " (assumed; --sms)" : "");
  std::printf("# protocols: the choice over %s (%s) that these links allow (LL128 only over same-GPU and NVLink "
              "hops)\n", ncclProto ? "those the executor runs" : "braid's defaults for these links (NCCL_PROTO widens it)",
              algo::describeProtocols(protocols).c_str());
  if (coll == algo::Coll::SendRecv)
    std::printf("# send/recv: a launch of sends and receives alone asks %s on every rank (Simple unless NCCL_PROTO leaves "
                "send/recv one protocol): the choice is made for it alone\n",
                algo::protocolName(api::p2pLaunchProtocol(constraints, protocols)));
  if (ncclAlgo || ncclProto)
    std::printf("# NCCL_ALGO=%s NCCL_PROTO=%s\n", ncclAlgo ? ncclAlgo : "(unset)", ncclProto ? ncclProto : "(unset)");
  for (const std::string& n : notes) std::printf("# note: %s\n", n.c_str());
  for (const std::string& w : warnings) std::printf("# warning: %s\n", w.c_str());
  std::printf("%14s  %-9s %-8s %8s %6s %11s  %s\n", "bytes", "algorithm", "protocol", "channels", "slices", "est_us",
              "runner-up");
  for (const Row& row : rows) {
    const algo::TunerChoice& b = row.r.best;
    std::string runnerUp = "-";
    if (row.r.hasRunnerUp) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), " %.2f", row.r.runnerUp.microseconds);
      runnerUp = choiceText(row.r.runnerUp) + buf;
    }
    std::printf("%14llu  %-9s %-8s %8d %6d %11.2f  %s\n", static_cast<unsigned long long>(row.bytes),
                b.algorithm ? b.algorithm->name : "p2p", algo::protocolName(b.protocol), b.channels, b.slicesPerStep,
                b.microseconds, runnerUp.c_str());
  }
  return 0;
}
