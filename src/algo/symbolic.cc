// Symbolic values and interval memory for the verifier.
#include "algo/symbolic.h"

#include <algorithm>
#include <iterator>

namespace braid::algo::verifier_detail {

bool Sym::operator==(const Sym& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::Undef:
    case Kind::Poison: return true;
    case Kind::Raw: return rank == o.rank && buf == o.buf && delta == o.delta;
    case Kind::Sum: return finals == o.finals && delta == o.delta && ranks == o.ranks;
  }
  return false;
}

Sym Sym::shifted(int64_t shift) const {
  Sym s = *this;
  if (kind == Kind::Raw || kind == Kind::Sum) s.delta += shift;
  return s;
}

std::string formatRanks(const RankSet& ranks, int nRanks) {
  std::string out = "{";
  bool firstItem = true;
  for (int r = 0; r < nRanks && r < kMaxRanks; ++r) {
    if (!ranks[r]) continue;
    int last = r;
    while (last + 1 < nRanks && last + 1 < kMaxRanks && ranks[last + 1]) ++last;
    if (!firstItem) out += ",";
    firstItem = false;
    out += std::to_string(r);
    if (last > r) {
      out += last == r + 1 ? ',' : '-';
      out += std::to_string(last);
    }
    r = last;
  }
  return out + "}";
}

std::string describe(const Sym& sym, uint64_t len, int nRanks, const std::function<std::string(uint16_t)>& bufName) {
  auto indexRange = [&](const std::string& buf) {
    const int64_t first = sym.delta;
    return buf + "[" + std::to_string(first) + ".." + std::to_string(first + static_cast<int64_t>(len)) + ")";
  };
  switch (sym.kind) {
    case Sym::Kind::Undef: return "nothing (never written)";
    case Sym::Kind::Poison: return "an erroneous value";
    case Sym::Kind::Raw: return "rank " + std::to_string(sym.rank) + "'s " + indexRange(bufName(sym.buf));
    case Sym::Kind::Sum: {
      std::string s = "the sum of ranks " + formatRanks(sym.ranks, nRanks) + " at " + indexRange("in");
      if (sym.finals == 0) return s + ", without kFinal";
      if (sym.finals == 1) return s + ", final";
      return s + ", kFinal applied " + std::to_string(sym.finals) + " times";
    }
  }
  return "?";
}

void appendPiece(Pieces& pieces, uint64_t len, const Sym& sym) {
  if (len == 0) return;
  if (!pieces.empty()) {
    Piece& last = pieces.back();
    if (last.sym.shifted(static_cast<int64_t>(last.len)) == sym) {
      last.len += len;
      return;
    }
  }
  pieces.push_back({len, sym});
}

SymMemory::SymMemory(uint64_t size, const Sym& init) : size_(size) {
  if (size > 0) runs_.emplace(0, Run{size, init});
}

Pieces SymMemory::read(uint64_t off, uint64_t count) const {
  Pieces out;
  if (count == 0) return out;
  auto it = runs_.upper_bound(off);
  --it;  // the run containing off (the map covers [0, size) without gaps)
  uint64_t pos = off;
  const uint64_t end = off + count;
  for (; pos < end; ++it) {
    const uint64_t runEnd = std::min(it->second.end, end);
    // Position p of the region is position p - off of the result.
    appendPiece(out, runEnd - pos, it->second.sym.shifted(static_cast<int64_t>(pos)));
    pos = runEnd;
  }
  return out;
}

void SymMemory::splitAt(uint64_t pos) {
  if (pos == 0 || pos >= size_) return;
  auto it = runs_.upper_bound(pos);
  --it;
  if (it->first == pos) return;
  Run tail{it->second.end, it->second.sym};
  it->second.end = pos;
  runs_.emplace(pos, tail);
}

void SymMemory::mergeAround(uint64_t begin, uint64_t end) {
  auto it = runs_.lower_bound(begin);
  if (it != runs_.begin()) --it;
  while (it != runs_.end() && it->first <= end) {
    auto next = std::next(it);
    if (next == runs_.end()) break;
    if (it->second.end == next->first && it->second.sym == next->second.sym) {
      it->second.end = next->second.end;
      runs_.erase(next);
    } else {
      it = next;
    }
  }
}

void SymMemory::write(uint64_t off, const Pieces& pieces) {
  uint64_t total = 0;
  for (const Piece& p : pieces) total += p.len;
  if (total == 0) return;
  const uint64_t end = off + total;
  splitAt(off);
  splitAt(end);
  runs_.erase(runs_.lower_bound(off), runs_.lower_bound(end));
  uint64_t pos = off;
  for (const Piece& p : pieces) {
    // Relative position 0 of the piece is region position pos.
    runs_.emplace(pos, Run{pos + p.len, p.sym.shifted(-static_cast<int64_t>(pos))});
    pos += p.len;
  }
  mergeAround(off, end);
}

void SymMemory::fill(uint64_t off, uint64_t count, const Sym& sym) { write(off, Pieces{{count, sym}}); }

}  // namespace braid::algo::verifier_detail
