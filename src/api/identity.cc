// braidVersion: the one export that NCCL does not have. braid and the real NCCL are both
// libnccl.so.2 with the same nccl*/pnccl* names; this tells them apart (src/fallback skips a
// file that has it when it looks for the real NCCL), and tells a user which one is loaded:
//   python3 -c "import ctypes; print(ctypes.CDLL('libnccl.so.2').braidVersion)"
#include "api/export.h"
#include "braid/version.h"

extern "C" BRAID_EXPORT const char* braidVersion(void) { return BRAID_VERSION_STRING; }
