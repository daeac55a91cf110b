// NCCL_ALGO and NCCL_PROTO: what the user allows the tuner, in NCCL's syntax, parsed by a pure
// function (the api reads the variables once per communicator; braid-tune reads them too).
//
//   LL,Simple                  these only, for every collective
//   ^LL128                     all but these
//   allreduce:ring;allgather:direct   per collective; a part without "name:" is for all of them
//
// Names are case-insensitive; spaces around names and separators are ignored. Anything else is
// an error naming the token and the valid names: an unknown name, an empty name (",,", a
// trailing ","), an empty part (";;"), "^" with nothing after it or in the middle of a list,
// "allreduce:" with no list, an unknown collective, two lists for the same collectives.
// NCCL's algorithms that braid does not have (CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT)
// are accepted and ignored, each with a note (NCCL's Tree is braid's tree): braid never uses NVLink multicast, so NVLS
// is not mapped onto braid's direct algorithms (a common NCCL_ALGO=^NVLS would otherwise turn
// off braid's one-shot all-reduce). A list of ignored names only constrains nothing.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "algo/protocol.h"
#include "algo/schedule.h"

namespace braid::algo {

// A set of protocols: bit (1 << Protocol).
using ProtocolSet = uint8_t;
constexpr ProtocolSet protocolBit(Protocol p) { return static_cast<ProtocolSet>(1u << static_cast<unsigned>(p)); }
constexpr ProtocolSet kAllProtocols = protocolBit(Protocol::LL) | protocolBit(Protocol::LL128) | protocolBit(Protocol::Simple);

// A set of algorithms: bit i is algorithms()[i] (algo/algorithm.h).
using AlgorithmSet = uint32_t;
constexpr AlgorithmSet kAllAlgorithms = ~AlgorithmSet{0};

constexpr int kCollSlots = 11;  // Coll's values are 0..10

// What the user allows, per collective (all of everything when nothing is set).
struct TuningConstraints {
  std::array<AlgorithmSet, kCollSlots> algorithms;
  std::array<ProtocolSet, kCollSlots> protocols;
  TuningConstraints() {
    algorithms.fill(kAllAlgorithms);
    protocols.fill(kAllProtocols);
  }
  AlgorithmSet algorithmsFor(Coll c) const { return algorithms[static_cast<size_t>(c)]; }
  ProtocolSet protocolsFor(Coll c) const { return protocols[static_cast<size_t>(c)]; }
};

// The collectives a part of NCCL_ALGO / NCCL_PROTO may name: NCCL's five, and braid's
// alltoall, gather, scatter (and sendrecv for NCCL_PROTO). A part without a name applies to all
// of them (NCCL_ALGO: all but sendrecv, which has no algorithms to choose from).
const std::vector<Coll>& tunableCollectives();

// Parses one variable's value (`text` empty or blank: no constraint) into `out`. On an error,
// returns false with `error` naming the variable, the token and the valid names; `out` is then
// unchanged. `notes` gets one line per name accepted and ignored.
bool parseAlgorithmList(std::string_view text, TuningConstraints* out, std::vector<std::string>* notes, std::string* error);
bool parseProtocolList(std::string_view text, TuningConstraints* out, std::string* error);

// Both variables' values (nullptr: unset).
bool parseTuningEnv(const char* ncclAlgo, const char* ncclProto, TuningConstraints* out,
                    std::vector<std::string>* notes, std::string* error);

// "ring, direct, twoshot" / "LL, LL128, Simple" as a user sees them in a set (tests, logs).
std::string describeAlgorithms(AlgorithmSet set);
std::string describeProtocols(ProtocolSet set);

}  // namespace braid::algo
