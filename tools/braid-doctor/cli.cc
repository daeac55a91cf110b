#include "cli.h"

#include <algorithm>

namespace braid::doctor {

const std::vector<std::string>& partNames() {
  static const std::vector<std::string> names = {"versions", "gpus",  "iommu", "mps",         "network",
                                                 "storage",  "copies", "peers", "ipc", "collectives"};
  return names;
}

bool isMeasurementPart(const std::string& p) {
  return p == "copies" || p == "peers" || p == "ipc" || p == "collectives";
}

void printUsage(FILE* out) {
  std::fprintf(out,
               "usage: braid-doctor [--quick] [--json FILE] [--plot FILE.png] [--skip PART[,PART...]]\n"
               "  Checks where this machine's GPU communication goes and how fast: versions, GPUs and their\n"
               "  links, IOMMU/ACS, MPS, network, storage, then measured copies, peer copies, CUDA IPC,\n"
               "  all-reduce (braid and the real NCCL) and GPUDirect Storage reads.\n"
               "  --quick         a shorter run (under 10 s; the default run stays under 60 s)\n"
               "  --json FILE     also write the report as JSON (docs/doctor.schema.json)\n"
               "  --plot FILE     also write bandwidth against size per measured path as a PNG\n"
               "  --skip PARTS    leave parts out; parts: versions gpus iommu mps network storage\n"
               "                  copies peers ipc collectives (storage: the inventory and the measurement)\n"
               "  --help          this text\n"
               "Exit status: 0 healthy, 1 a warning, 2 an error or a bad command line.\n");
}

bool parseCli(int argc, char** argv, CliOptions* out, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') {
        *error = a + " needs a value";
        return false;
      }
      *dst = argv[++i];
      return true;
    };
    if (a == "--quick") out->quick = true;
    else if (a == "--help" || a == "-h") out->help = true;
    else if (a == "--json") {
      if (!value(&out->jsonPath)) return false;
    } else if (a == "--plot") {
      if (!value(&out->plotPath)) return false;
    } else if (a == "--skip") {
      std::string list;
      if (!value(&list)) return false;
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        std::string part = list.substr(start, comma - start);
        const auto& names = partNames();
        if (std::find(names.begin(), names.end(), part) == names.end()) {
          *error = "--skip: unknown part '" + part + "'";
          return false;
        }
        out->skip.push_back(part);
        start = comma + 1;
      }
    } else {
      *error = "unknown argument '" + a + "'";
      return false;
    }
  }
  return true;
}

}  // namespace braid::doctor
