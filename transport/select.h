// Which transport joins this rank to each peer, decided in one place from where the two run
// (issue 15 item 1): both engines and the init ask here.
//   host memory:   same process: plain memory; same host: shared memory; other host: UCX.
//   device memory: same process: pointers; same host: CUDA IPC (or FIFOs staged in pinned
//                  shared memory, transport/p2p.h); other host: Simple FIFOs at each end, moved
//                  by the UCX proxy (transport/net_device.h): in device memory handed to UCX
//                  where it takes CUDA memory (GPUDirect), else staged in pinned host memory.
#pragma once
#include <string>
#include <vector>

#include "core/peer_info.h"
#include "transport/transport.h"

namespace braid::transport {

enum class Locality { SameProcess, SameHost, OtherHost };

Locality localityOf(const PeerInfo& me, const PeerInfo& peer);
// Whether some peer runs on another host (a communicator that needs UCX at init).
bool needsNetwork(const std::vector<PeerInfo>& peers, int me);

// The GPU connection to a peer: the first of deviceTransports() that can connect the two.
//   P2P (p2p.h): pointers, CUDA IPC or pinned shared memory (P2pTransport decides which:
//     planStaging).
//   UCX (net_device.h): each end's FIFO of its own, the UCX proxy moves the slots; the slots
//     are in pinned host memory, or in device memory where netSlotsInDeviceMemory says so.
// Which protocols (kernels/proto_*.cuh) each carries:
//   Simple: every transport (a slot is full when the tail counter says so).
//   LL: P2P (every 8-byte word carries its flag and arrives whole, also in host memory); not
//       UCX: LL moves no tail counter, so the proxy could not tell when a slot is full or how
//       much of it a slice wrote (it would have to scan lines for flags and forward them as
//       they appear, in 8-byte-atomic writes at the far end: not written).
//   LL128: only P2P links that P2pTransport marks ordered128 (one GPU or NVLink); never UCX:
//       the 128-byte line reaches the far end through the proxy's send, TCP and a CPU copy
//       into pinned memory that the GPU reads over PCIe, none of which keeps a line whole, so
//       a reader could see the flag before the 120 data bytes beside it.
// Connections are made transport by transport in this order on every rank (P2P's connect
// is collective among the ranks it links).
const std::vector<const DeviceTransport*>& deviceTransports();
const DeviceTransport& deviceTransportOf(const PeerInfo& me, const PeerInfo& peer);

// Whether a protocol may run on a communicator: every pair of ranks' GPU connection carries
// it; LL128 also needs every pair's path ordered128 and no FIFO staged in host memory
// (p2p.h ordered128Everywhere; NCCL_P2P_DISABLE read here). Every rank that sees the same GPUs
// comes to the same answer, which a protocol choice shared by all ranks needs.
bool llEverywhere(const std::vector<PeerInfo>& peers);
bool ll128Everywhere(const std::vector<PeerInfo>& peers, int me);

// The host-memory connection to a peer: the first of hostTransports() that can connect the two.
//   memory: same process, a FIFO in the receiver's heap. shared memory: same host, a POSIX
//   shared-memory segment of the receiver's. ucx: other hosts, a FIFO at each end.
const HostLinkTransport& hostTransportOf(const PeerInfo& me, const PeerInfo& peer);

// GPUDirect: whether the GPU connections to other hosts keep their slots in device memory and
// hand them to UCX as CUDA memory (UCX then moves them with its CUDA transports: a NIC's RDMA
// straight into GPU memory where the machine has one, else its own copies), instead of
// staging them in pinned host memory that the kernels reach over PCIe.
//   NoCudaUcx  the communicator's UCX reports no CUDA memory support (UcxNet::cudaMemory()).
//   TurnedOff  BRAID_GPUDIRECT=0.
//   NoRdma     by default where no RDMA device is here (/sys/class/infiniband is empty) or
//              UCX_TLS names no RDMA transport (rc, dc, ud, ib, all): UCX would then copy each
//              device slot through host memory itself, per fragment, on the proxy's thread --
//              15-70x slower than braid's staging over TCP (perf/NOTES.md, session 14).
//              BRAID_GPUDIRECT=1 hands device memory to UCX anyway.
//   On         otherwise (BRAID_GPUDIRECT=1, or an RDMA device and a UCX that takes CUDA memory).
enum class GpuDirect { NoCudaUcx, TurnedOff, NoRdma, On };
// `setting`: BRAID_GPUDIRECT's value, `ucxTls`: UCX_TLS's (nullptr: unset).
GpuDirect gpuDirectChoice(bool ucxCudaMemory, const char* setting, const char* ucxTls, bool rdmaDevice);
// The same from the environment and /sys/class/infiniband.
GpuDirect gpuDirectChoice(bool ucxCudaMemory);
inline bool netSlotsInDeviceMemory(bool ucxCudaMemory) { return gpuDirectChoice(ucxCudaMemory) == GpuDirect::On; }

// "rank 0 -> rank 3: other host, UCX (host memory: ...; device memory: ...)".
std::string describeChoice(const std::vector<PeerInfo>& peers, int me, int peer,
                           GpuDirect gpuDirect = GpuDirect::NoCudaUcx);
// One INFO line per peer (NCCL_DEBUG_SUBSYS=NET,P2P), at init; and once per process, where a
// communicator has ranks on other hosts, whether device memory goes to UCX directly, and why.
void logChoices(const std::vector<PeerInfo>& peers, int me, GpuDirect gpuDirect);

}  // namespace braid::transport
