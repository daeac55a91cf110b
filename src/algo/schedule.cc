// Names and buffer sizes of the collectives (NCCL's conventions).
#include "algo/schedule.h"

namespace braid::algo {

const char* collName(Coll c) {
  switch (c) {
    case Coll::Broadcast: return "Broadcast";
    case Coll::Reduce: return "Reduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AllReduce: return "AllReduce";
    case Coll::SendRecv: return "SendRecv";
    case Coll::AlltoAll: return "AlltoAll";
    case Coll::Scatter: return "Scatter";
    case Coll::Gather: return "Gather";
  }
  return "Unknown";
}

bool collReduces(Coll c) {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}

uint64_t inputCount(Coll c, uint64_t count, int nRanks, int rank, int root) {
  const uint64_t n = nRanks > 0 ? static_cast<uint64_t>(nRanks) : 0;
  switch (c) {
    case Coll::AllReduce:
    case Coll::AllGather:
    case Coll::Reduce:
    case Coll::Gather:
    case Coll::SendRecv: return count;
    case Coll::ReduceScatter:
    case Coll::AlltoAll: return n * count;
    case Coll::Broadcast: return rank == root ? count : 0;  // sendbuff is ignored off the root
    case Coll::Scatter: return rank == root ? n * count : 0;
  }
  return 0;
}

uint64_t outputCount(Coll c, uint64_t count, int nRanks, int rank, int root) {
  const uint64_t n = nRanks > 0 ? static_cast<uint64_t>(nRanks) : 0;
  switch (c) {
    case Coll::AllReduce:
    case Coll::ReduceScatter:
    case Coll::Broadcast:
    case Coll::Scatter:
    case Coll::SendRecv: return count;
    case Coll::AllGather:
    case Coll::AlltoAll: return n * count;
    case Coll::Reduce: return rank == root ? count : 0;  // recvbuff is ignored off the root
    case Coll::Gather: return rank == root ? n * count : 0;
  }
  return 0;
}

}  // namespace braid::algo
