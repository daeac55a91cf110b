// The measurements braid-doctor runs on the GPUs (defined in measure_*.{cc,cu}). Each adds its figures, facts and skips to the report
// and keeps within its options' time budget.
#pragma once
#include <string>
#include <vector>

#include "figure.h"

namespace braid::doctor {

struct MeasureOptions {
  bool quick = false;
  double budgetSeconds = 40;
  std::string selfPath;   // argv[0]'s real path
  std::string braidPerf;  // path of braid-perf, may be empty
  std::string realNccl;   // the real libnccl.so.2 found, may be empty
  std::vector<std::string> skip;
};

void measureCopies(const MeasureOptions&, Report*);       // H2D/D2H pinned+pageable, D2D
void measurePeers(const MeasureOptions&, Report*);        // P2P copy + kernel read/write per pair
void measureIpc(const MeasureOptions&, Report*);          // CUDA IPC between two processes
void measureCollectives(const MeasureOptions&, Report*);  // braid and real NCCL all-reduce
void measureStorage(const MeasureOptions&, Report*);      // cuFile vs POSIX read + cudaMemcpy
// A hidden mode of the doctor's own binary, for the second IPC process: returns the exit code.
int ipcChildMain(int argc, char** argv);  // called when argv[1] == "--ipc-child"

}  // namespace braid::doctor
