// One collective test case on a RankGroup: inputs, in-place layout as NCCL defines it,
// running, and checking against the float64 reference. Shared by the GPU tests.
#pragma once
#include <string>
#include <vector>

#include "rank_group.h"
#include "reference.h"

namespace braid::gputest {

struct CaseSpec {
  const algo::Algorithm* algorithm = nullptr;
  algo::Coll coll = algo::Coll::AllReduce;
  ncclDataType_t type = ncclFloat32;
  TestOp op = TestOp::Sum;
  uint64_t count = 0;
  int root = 0;
  bool inPlace = false;
  algo::Protocol protocol = algo::Protocol::Simple;  // asked; RankGroup::usableProtocol decides
  std::string name() const;
};

struct CaseResult {
  bool ok = true;
  std::string message;  // per rank: how many elements are wrong, the first one (index, got, expected)
  double seconds = 0;   // enqueue to completion
  algo::Protocol ran = algo::Protocol::Simple;  // the protocol the case ran with
};

// Device buffers of one rank, reused across cases (grown when needed).
class CaseRunner {
 public:
  explicit CaseRunner(RankGroup& group) : group_(group) {}
  ~CaseRunner();
  CaseResult run(const CaseSpec& spec);

 private:
  bool ensure(size_t bytesPerRank);
  RankGroup& group_;
  std::vector<char*> buffers_;   // per rank, guard + region + guard
  std::vector<void*> scalars_;   // per rank, 8 bytes of device memory
  size_t capacity_ = 0;
  bool broken_ = false;
};

}  // namespace braid::gputest
