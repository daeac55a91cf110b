// Stand-ins for the measurements while they are not in this tree (CMake compiles this file only
// when measure_copies.cc is absent): each says so in the report's skipped list.
#include "measure.h"

#include <cstdio>

namespace braid::doctor {

namespace {
void notBuilt(Report* r, const char* part) { r->skipped.push_back({part, "not built in this branch"}); }
}  // namespace

void measureCopies(const MeasureOptions&, Report* r) { notBuilt(r, "copies"); }
void measurePeers(const MeasureOptions&, Report* r) { notBuilt(r, "peers"); }
void measureIpc(const MeasureOptions&, Report* r) { notBuilt(r, "ipc"); }
void measureCollectives(const MeasureOptions&, Report* r) { notBuilt(r, "collectives"); }
void measureStorage(const MeasureOptions&, Report* r) { notBuilt(r, "storage"); }

int ipcChildMain(int, char**) {
  std::fprintf(stderr, "braid-doctor: --ipc-child: the IPC measurement is not built in this branch\n");
  return 2;
}

}  // namespace braid::doctor
