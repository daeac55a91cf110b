// The rendezvous root: started by ncclGetUniqueId (or by rank 0 when NCCL_COMM_ID is set).
// It collects one PeerInfo from every rank and sends each rank the whole table: two messages
// per rank, O(n) at the root, no n^2 connections. One event loop (epoll) serves every
// connection at once: a stray connection waits out its short hello deadline
// (wire::kHelloSeconds) without holding up the ranks, every field of a hello is checked before
// it is used, and a rank that closes its connection early fails the rendezvous at once for
// all, naming it. After a failure a root of its own id (not `fixed`) answers late ranks with
// the reason until the deadline.
#pragma once
#include "core/unique_id.h"

namespace braid {

// Binds a listener (on the bootstrap interface, or `fixed` when non-null) and starts the
// detached root thread. Fills `content` with the address and a fresh secret.
ncclResult_t startRoot(const SocketAddress* fixed, uint64_t secret, UniqueIdContent* content);

}  // namespace braid
