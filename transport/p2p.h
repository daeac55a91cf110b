// P2P transport: the Simple-protocol FIFOs between ranks on one node, reached by direct
// pointers (ranks in one process), CUDA IPC (ranks in other processes, on the same GPU or
// another one), or pinned host memory (GPUs without P2P access, or NCCL_P2P_DISABLE=1).
//
// Each rank makes one region per connect() call (rounded up to 2 MiB, so that an importer
// never maps a neighbour's memory) holding, per incoming connection, the FIFO slots and the
// tail counter, and per outgoing connection the head counter. The region is device memory
// (cudaMalloc, shared by CUDA IPC) unless it is staged: then it is a POSIX shared-memory
// object, registered with CUDA as mapped pinned memory, that every linked rank maps (in
// another process by name; the name is unlinked once every peer has mapped it). The kernels
// reach both kinds through device pointers. Handles and offsets travel over the bootstrap.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/bootstrap.h"
#include "nccl.h"
#include "transport/p2p_fifo.h"
#include "transport/transport.h"

namespace braid::transport {

// What this transport needs to know about every rank (the communicator fills it in).
struct P2pPeerInfo {
  int32_t rank = -1;
  int32_t cudaDev = -1;   // the device ordinal as seen by the process that owns the rank
  int64_t pid = 0;
  uint64_t hostHash = 0;  // ranks with equal hostHash and pid share an address space
  int64_t busId = -1;     // PCI bus id of the GPU as a number; tells GPUs apart across processes
};
// A rank as this transport names it (its GPU's bus id as a number).
P2pPeerInfo p2pPeerInfo(const PeerInfo& p);

struct P2pOptions {
  uint32_t slotBytes = 512 * 1024;  // a multiple of 16
  uint32_t nSlots = 8;
};

// Why this rank's region must be staged in host memory for a linked peer (kNone: it need
// not; the peer's GPU is this one or one it reaches directly).
enum class StageReason : int {
  kNone = 0,
  kP2pDisabled,    // NCCL_P2P_DISABLE is set; the GPUs could reach each other directly
  kNoPeerAccess,   // cudaDeviceCanAccessPeer is false in one direction or both
  kGpuNotVisible,  // the peer's GPU (by PCI bus id) is not a device of this process
};
const char* stageReasonName(StageReason r);

// What the staging decision asks of CUDA (real calls in connect(); fakes in unit tests).
struct GpuQueries {
  std::function<int(int64_t busId)> deviceByBusId;  // this process's ordinal of that GPU, or -1
  std::function<bool(int fromDev, int toDev)> canAccessPeer;
  // Whether two GPUs of this process are joined by NVLink (null: never, i.e. in doubt, no).
  std::function<bool(int fromDev, int toDev)> nvlink;
};

// The staging decision for the region of rank `self`, one reason per linked peer (in the
// order of `linked`). The region is staged when any reason is not kNone. Same GPU (same
// process and device, or same bus id): direct. Other GPUs: the peer's device in this
// process (its ordinal when in this process, else looked up by bus id) must be accessible
// both ways. A reason other than kNone and kP2pDisabled also means this rank cannot use
// device memory that peer exports. Peers must be on this host (same hostHash).
std::vector<StageReason> planStaging(const P2pPeerInfo& self, const std::vector<P2pPeerInfo>& peers,
                                     const std::vector<int>& linked, bool p2pDisabled, const GpuQueries& gpu);

// Whether 128-byte stores of one warp instruction go from rank a's GPU to rank b's whole and
// in order, as this process (that of `viewer`) sees it: the same GPU, or two GPUs that it sees
// joined by NVLink both ways. PCIe splits and reorders such writes, so peer GPUs without
// NVLink do not qualify, and neither does a GPU this process cannot see (in doubt, no). Ranks
// must be on one host. This is what the LL128 protocol needs (kernels/proto_ll128.cuh).
bool ordered128Path(const P2pPeerInfo& viewer, const P2pPeerInfo& a, const P2pPeerInfo& b, const GpuQueries& gpu);
// Whether every pair of `peers` has such a path and no FIFO would be staged in host memory
// (p2pDisabled: NCCL_P2P_DISABLE). Every rank of a communicator that sees the same GPUs gets
// the same answer, which is what a protocol choice shared by all ranks needs.
bool ordered128Everywhere(const std::vector<P2pPeerInfo>& peers, int viewer, bool p2pDisabled, const GpuQueries& gpu);

// The queries as CUDA answers them on this machine (NVLink: native atomics between the
// peers, which CUDA reports for NVLink and not for PCIe).
GpuQueries cudaGpuQueries();

// "0000:18:00.0" for P2pPeerInfo::busId (domain<<20 | bus<<12 | dev<<4 | fn); "?" when < 0.
std::string busIdString(int64_t busId);

// The p2p seam's connections (transport.h); p2pDeviceTransport() makes them.
class P2pTransport final : public DeviceLinks {
 public:
  // Collective over `boot` (all ranks that share a link call it). A send link (c, p) on
  // rank r needs the recv link (c, r) on rank p. `peers` is indexed by rank.
  static ncclResult_t connect(Bootstrap& boot, const std::vector<P2pPeerInfo>& peers, const P2pOptions& options,
                              const std::vector<P2pLink>& sendTo, const std::vector<P2pLink>& recvFrom,
                              std::unique_ptr<P2pTransport>* out);
  // Frees without the teardown barrier when close() was not called (abort paths).
  ~P2pTransport() override;
  P2pTransport(const P2pTransport&) = delete;
  P2pTransport& operator=(const P2pTransport&) = delete;

  // Collective: closes imported handles, waits for every peer to do the same, then frees.
  ncclResult_t close() override;

  // False when connect() was not asked for that link. An end is marked ordered128 when both
  // ranks found an ordered128Path between them and neither region is staged in host memory.
  bool sendEnd(int channel, int peer, FifoSendEnd* out) const override;
  bool recvEnd(int channel, int peer, FifoRecvEnd* out) const override;
  const std::vector<P2pLink>& sendLinks() const { return sendTo_; }
  const std::vector<P2pLink>& recvLinks() const { return recvFrom_; }

  // The size of this rank's FIFO region: device memory, or, when hostStaged(), pinned host
  // memory (shared memory that the peers map too; no device memory is used then).
  size_t bytesAllocated() const override { return regionBytes_; }
  bool hostStaged() const { return hostStaged_; }
  size_t hostBytes() const override { return hostStaged_ ? regionBytes_ : 0; }
  bool systemScope() const override { return hostStaged_; }
  bool proxied() const override { return false; }

 private:
  P2pTransport() = default;
  ncclResult_t releaseImported();  // closes or unmaps the peers' regions
  ncclResult_t releaseLocal();     // that, then frees this rank's region (and unlinks its name)

  // A peer's staged region mapped into this process (shm_open + mmap + cudaHostRegister).
  struct HostMapping {
    void* host = nullptr;
    size_t bytes = 0;
  };

  Bootstrap* boot_ = nullptr;
  int rank_ = -1;
  int cudaDev_ = -1;
  char* region_ = nullptr;     // this process's address of the region (host address when staged)
  char* regionDev_ = nullptr;  // the kernels' address of the region (== region_ for device memory)
  size_t regionBytes_ = 0;
  bool hostStaged_ = false;
  std::string shmName_;        // staged region's shared-memory name until it is unlinked
  std::vector<P2pLink> sendTo_, recvFrom_;
  std::vector<FifoSendEnd> sendEnds_;
  std::vector<FifoRecvEnd> recvEnds_;
  std::vector<void*> imported_;            // cudaIpcOpenMemHandle results, to close
  std::vector<HostMapping> importedHost_;  // peers' staged regions, to unregister and unmap
  bool closed_ = false;
  bool crossProcess_ = false;  // a linked peer lives in another process (close() then waits for it)
};

}  // namespace braid::transport
