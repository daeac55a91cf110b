// Messages of the bootstrap protocol (root rendezvous and peer connections), their limits,
// and the checks that every received message passes before any of its fields is used.
// Anyone who can reach a bootstrap port can send these bytes, so the checks are pure
// functions of the bytes: the fuzz test (tests/unit/core) feeds them anything.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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

// What a rank sends the root: a Hello, then its PeerInfo.
constexpr size_t kRootHelloBytes = sizeof(Hello) + sizeof(PeerInfo);

// The most ranks one rendezvous accepts. The root answers every rank with the whole table,
// n tables of n entries, so far fewer ranks already take longer than any init timeout; the
// limit is there so that a count read from the wire can never size memory.
constexpr int kMaxRanks = 1 << 16;

// The largest tagged message a rank buffers for later (one that arrives before its receive
// is posted). Setup messages are a few KiB even for thousands of ranks; the bound keeps a
// peer's header from sizing an allocation.
constexpr uint64_t kMaxBufferedMessageBytes = 64ull << 20;

// How long a new connection may take to present its hello. A real rank writes it as soon as
// its connect completes, so this only has to cover scheduling delays on a loaded host; a
// connection that says nothing for longer is a stray and only holds a slot.
constexpr double kHelloSeconds = 2.0;

// Why the root refused a hello.
enum class HelloFault {
  kNone,           // acceptable
  kShort,          // fewer bytes than a hello: wait for more, or drop when the sender closed
  kWrongSecret,    // not this unique id's secret
  kWrongKind,      // the secret, but not a rank reporting to the root
  kBadPeerInfo,    // the secret, but a field out of range (the text says which)
};

struct RootHello {
  HelloFault fault = HelloFault::kShort;
  // The secret and the kind were right: the sender holds this unique id. A refusal is then
  // answered (a rank that made a mistake learns it), while strangers are dropped silently.
  bool authenticated = false;
  PeerInfo info{};      // valid only when fault == kNone
  std::string problem;  // what was wrong, for the log and the reply; empty when fault == kNone
};

// Parses and checks the first `size` bytes a connection sent the root. Decides as early as
// it can: a wrong secret is known after sizeof(Hello) bytes. With size < kRootHelloBytes and
// a right secret, fault is kShort and authenticated is true.
RootHello parseRootHello(const void* bytes, size_t size, uint64_t secret);

// Field-by-field check of one PeerInfo from the wire; empty when every field is in range.
// nRanks must be in 1..kMaxRanks (and equal expectedRanks when that is positive), rank in
// 0..nRanks-1, strings NUL-terminated, the listen address IPv4 or IPv6 with a port.
std::string peerInfoProblem(const PeerInfo& info, int expectedRanks);

// The client's checks of the root's answer before it sizes anything by it: a known status,
// on failure a NUL-terminated error text, on success our own nRanks. Empty when good.
std::string rootReplyProblem(const RootReply& reply, int nRanks);
// Every entry of the table is in range and entry i is rank i.
std::string peerTableProblem(const std::vector<PeerInfo>& peers, int nRanks);

}  // namespace braid::wire
