// The doctor and its IPC child talk over one SOCK_SEQPACKET socket pair: fixed-size messages,
// one per request or reply, and a cuMem handle's file descriptor riding on a request as
// SCM_RIGHTS. Internal to measure_ipc.cc and measure_ipc_child.cc.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace braid::doctor::measure {

enum class IpcKind : int32_t { Legacy = 1, CuMem = 2, Quit = 3 };

struct IpcRequest {
  IpcKind kind = IpcKind::Quit;
  int32_t copyRepeats = 0;  // 0: open and close only (latency); otherwise also time a copy out of it
  uint64_t bytes = 0;       // the shared allocation's size
  uint8_t pattern = 0;      // every byte of the allocation holds this value
  cudaIpcMemHandle_t handle{};  // Legacy only
};

struct IpcReply {
  int32_t ok = 0;
  int32_t verified = 0;  // the first bytes read through the import were the pattern
  double openUs = 0;     // cudaIpcOpenMemHandle, or cuMemImportFromShareableHandle + map + access
  double copyGbps = 0;   // best of copyRepeats device-to-device copies out of the import
  char error[256] = "";
};

// One message; `fd` >= 0 goes along as SCM_RIGHTS. False with *why on failure.
bool sendMessage(int socket, const void* data, size_t size, int fd, std::string* why);
// One message of exactly `size` bytes, waiting until `deadline` (nowSeconds()); a descriptor
// that came with it lands in *fd (else -1). False with *why on failure, end of stream or timeout.
bool receiveMessage(int socket, void* data, size_t size, int* fd, double deadline, std::string* why);

}  // namespace braid::doctor::measure
