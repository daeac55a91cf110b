// Messages of the bootstrap protocol (root rendezvous and peer connections).
#pragma once
#include <cstdint>

#include "core/peer_info.h"

namespace braid::wire {

constexpr uint32_t kHelloRoot = 0x524f4f54;  // a rank reporting to the root
constexpr uint32_t kHelloPeer = 0x50454552;  // a rank opening a peer connection

// First bytes on every bootstrap connection. A connection without the right secret is
// dropped and logged.
struct Hello {
  uint64_t secret;
  uint32_t kind;
  int32_t rank;
};

// The root's answer: status 0 then nRanks PeerInfo, or an error text.
struct RootReply {
  int32_t status;  // ncclResult_t
  int32_t nRanks;
  char error[512];
};

// Header of one tagged message on a peer connection.
struct MessageHeader {
  uint32_t tag;
  uint32_t reserved;
  uint64_t size;
};

}  // namespace braid::wire
