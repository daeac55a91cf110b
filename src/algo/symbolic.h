// Symbolic values for the verifier, and a rank's memory as intervals of them.
//
// A value describes a whole run of elements at once: element m of a run holds something
// about input index m + delta. So a step over a million elements costs the same as a step
// over one, and the verifier's time depends on the number of steps, not on counts.
#pragma once
#include <algorithm>
#include <bitset>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace braid::algo::verifier_detail {

constexpr int kMaxRanks = 1024;
using RankSet = std::bitset<kMaxRanks>;

struct Sym {
  enum class Kind : uint8_t {
    Undef,   // never written
    Raw,     // an unmodified element of a buffer: rank's buffer `buf`, index pos + delta
    Sum,     // a reduction of the ranks in `ranks`, all at input index pos + delta
    Poison,  // the result of an operation already reported as an error (not reported again)
  };
  Kind kind = Kind::Undef;
  uint8_t finals = 0;  // Sum: how many times kFinal was applied
  uint16_t buf = 0;    // Raw: the origin buffer
  int32_t rank = 0;    // Raw: the origin rank
  int64_t delta = 0;   // Raw, Sum: index = position + delta
  RankSet ranks{};     // Sum: the contributions

  static Sym undef() { return {}; }
  static Sym poison() { return {.kind = Kind::Poison}; }
  static Sym raw(int rank, uint16_t buf, int64_t delta) {
    return {.kind = Kind::Raw, .buf = buf, .rank = rank, .delta = delta};
  }
  static Sym sum(const RankSet& ranks, int64_t delta, uint8_t finals) {
    return {.kind = Kind::Sum, .finals = finals, .delta = delta, .ranks = ranks};
  }
  bool operator==(const Sym& o) const;
  // The same value seen from a position `shift` elements further along (delta moves back).
  Sym shifted(int64_t shift) const;
};

// A run of `len` elements holding `sym`, in message (or view) coordinates.
struct Piece {
  uint64_t len = 0;
  Sym sym;
};
using Pieces = std::vector<Piece>;

// "{0-3,5}"
std::string formatRanks(const RankSet& ranks, int nRanks);
// A human description of `len` elements holding `sym` ("rank 2's in[5..9)", ...).
// bufName names buffer indices ("in", "out", "send3").
std::string describe(const Sym& sym, uint64_t len, int nRanks, const std::function<std::string(uint16_t)>& bufName);

// Cuts two piece lists of the same total length at each other's boundaries and calls
// f(len, a, b) for each common run.
template <class F>
void zipPieces(const Pieces& a, const Pieces& b, F f) {
  size_t i = 0, j = 0;
  uint64_t usedA = 0, usedB = 0, pos = 0;
  while (i < a.size() && j < b.size()) {
    const uint64_t len = std::min(a[i].len - usedA, b[j].len - usedB);
    f(pos, len, a[i].sym.shifted(static_cast<int64_t>(usedA)), b[j].sym.shifted(static_cast<int64_t>(usedB)));
    pos += len;
    usedA += len;
    usedB += len;
    if (usedA == a[i].len) ++i, usedA = 0;
    if (usedB == b[j].len) ++j, usedB = 0;
  }
}

// Appends a run, merging it with the previous one when they continue each other.
void appendPiece(Pieces& pieces, uint64_t len, const Sym& sym);

// One memory region of a rank: [0, size) as non-overlapping runs of symbolic values.
class SymMemory {
 public:
  SymMemory() = default;
  SymMemory(uint64_t size, const Sym& init);  // init given for position 0
  uint64_t size() const { return size_; }
  // The values of [off, off + count), in coordinates relative to off.
  Pieces read(uint64_t off, uint64_t count) const;
  // Stores pieces (relative to off) at [off, off + total length).
  void write(uint64_t off, const Pieces& pieces);
  void fill(uint64_t off, uint64_t count, const Sym& sym);  // sym relative to off

 private:
  struct Run {
    uint64_t end;
    Sym sym;  // delta relative to position 0 of the region
  };
  void splitAt(uint64_t pos);
  void mergeAround(uint64_t begin, uint64_t end);
  uint64_t size_ = 0;
  std::map<uint64_t, Run> runs_;  // keyed by begin
};

}  // namespace braid::algo::verifier_detail
