#include "algo/tuner_env.h"

#include <cctype>
#include <iterator>

#include "algo/algorithm.h"

namespace braid::algo {

namespace {

constexpr const char* kNcclOnlyAlgorithms[] = {"CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
constexpr Protocol kProtocols[] = {Protocol::LL, Protocol::LL128, Protocol::Simple};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool sameNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// One variable's parse. Everything goes into `next`, copied out only when the whole value is good.
class ListParser {
 public:
  ListParser(bool algorithms, std::string_view whole, std::vector<std::string>* notes, std::string* error)
      : algorithms_(algorithms), whole_(whole), notes_(notes), error_(error) {}

  bool parse(TuningConstraints* out) {
    TuningConstraints next = *out;
    std::string_view rest = whole_;
    if (trim(rest).empty()) return true;
    // A bare part applies to all, then named parts override it, whatever their order.
    bool haveAll = false;
    uint32_t all = 0;
    std::string_view allText;
    struct Named {
      Coll coll;
      uint32_t set;
      std::string_view text;
    };
    std::vector<Named> named;
    for (;;) {
      const size_t semi = rest.find(';');
      const std::string_view raw = rest.substr(0, semi);
      const std::string_view part = trim(raw);
      if (part.empty()) return fail("an empty part (parts for different collectives are separated by single \";\")");
      const size_t colon = part.find(':');
      std::string_view list = part;
      bool forAll = colon == std::string_view::npos;
      Coll coll = Coll::AllReduce;
      if (!forAll) {
        const std::string_view name = trim(part.substr(0, colon));
        list = trim(part.substr(colon + 1));
        if (name.empty()) return fail("an empty collective name before \":\" in " + quoted(part) + "; collectives: " + collectives());
        if (!findCollective(name, &coll) || (algorithms_ && coll == Coll::SendRecv)) {
          if (algorithms_ && sameNoCase(name, "sendrecv"))
            return fail("sendrecv has no algorithms to choose (each send and each recv is one lane per peer); "
                        "NCCL_ALGO's collectives: " + collectives());
          return fail("unknown collective " + quoted(name) + " in " + quoted(part) + "; collectives: " + collectives());
        }
        if (list.empty()) return fail(quoted(std::string(name) + ":") + " names no " + what() + "; valid names: " + validNames());
      }
      uint32_t set = 0;
      if (!parseList(list, forAll ? std::string_view() : part.substr(0, colon), &set)) return false;
      if (forAll) {
        if (haveAll)
          return fail("two lists for all collectives (" + quoted(allText) + " and " + quoted(list) +
                      "); names of one list are separated by \",\" (LL,Simple), parts for one collective by \";\" "
                      "(allreduce:LL)");
        haveAll = true;
        all = set;
        allText = list;
      } else {
        for (const Named& n : named)
          if (n.coll == coll)
            return fail("two lists for " + std::string(collName(coll)) + " (" + quoted(n.text) + " and " + quoted(part) + ")");
        named.push_back({coll, set, part});
      }
      if (semi == std::string_view::npos) break;
      rest = rest.substr(semi + 1);
    }
    if (haveAll)
      for (Coll c : tunableCollectives())
        if (!(algorithms_ && c == Coll::SendRecv)) assign(&next, c, all);
    for (const Named& n : named) assign(&next, n.coll, n.set);
    *out = next;
    for (std::string& n : pendingNotes_) notes_->push_back(std::move(n));
    return true;
  }

 private:
  const char* var() const { return algorithms_ ? "NCCL_ALGO" : "NCCL_PROTO"; }
  const char* what() const { return algorithms_ ? "algorithms" : "protocols"; }

  bool fail(const std::string& why) {
    *error_ = std::string(var()) + "=" + quoted(whole_) + ": " + why;
    return false;
  }

  std::string validNames() const {
    if (!algorithms_) return "LL, LL128, Simple (any case)";
    std::string s;
    for (const Algorithm* a : algorithms()) s += (s.empty() ? "" : ", ") + std::string(a->name);
    s += ", and NCCL's ";
    for (size_t i = 0; i < std::size(kNcclOnlyAlgorithms); ++i) s += std::string(i ? ", " : "") + kNcclOnlyAlgorithms[i];
    return s + " (accepted and ignored: braid has none of them); any case";
  }

  std::string collectives() const {
    std::string s;
    for (Coll c : tunableCollectives())
      if (!(algorithms_ && c == Coll::SendRecv)) s += (s.empty() ? "" : ", ") + lower(collName(c));
    return s + " (any case)";
  }

  static bool findCollective(std::string_view name, Coll* out) {
    for (Coll c : tunableCollectives())
      if (sameNoCase(name, collName(c))) {
        *out = c;
        return true;
      }
    return false;
  }

  void assign(TuningConstraints* t, Coll c, uint32_t set) const {
    if (algorithms_) t->algorithms[static_cast<size_t>(c)] = set;
    else t->protocols[static_cast<size_t>(c)] = static_cast<ProtocolSet>(set);
  }

  void note(const std::string& line) {
    for (const std::string& n : pendingNotes_)
      if (n == line) return;
    pendingNotes_.push_back(line);
  }

  // "[^]name[,name...]" into a set; `collText` names the collective in notes (empty: all).
  bool parseList(std::string_view list, std::string_view collText, uint32_t* out) {
    const bool exclude = !list.empty() && list.front() == '^';
    if (exclude) {
      list = trim(list.substr(1));
      if (list.empty()) return fail("\"^\" excludes nothing: name what to exclude after it (e.g. ^" +
                                    std::string(algorithms_ ? "twoshot" : "LL128") + "); valid names: " + validNames());
    }
    uint32_t bits = 0;
    bool onlyIgnored = true;
    std::string_view rest = list, previous;
    for (;;) {
      const size_t comma = rest.find(',');
      const std::string_view name = trim(rest.substr(0, comma));
      if (name.empty())
        return fail("an empty name" + (previous.empty() ? std::string(" at the start of ") : " after " + quoted(previous) + " in ") +
                    quoted(list) + " (names are separated by single \",\"); valid names: " + validNames());
      if (name.front() == '^')
        return fail("\"^\" may only start a list (\"^a,b\" excludes both), not stand before " + quoted(name.substr(1)) +
                    " in " + quoted(list));
      uint32_t bit = 0;
      bool ignored = false;
      if (!lookup(name, &bit, &ignored)) return fail("unknown " + std::string(algorithms_ ? "algorithm " : "protocol ") +
                                                     quoted(name) + "; valid names: " + validNames());
      bits |= bit;
      onlyIgnored = onlyIgnored && ignored;
      previous = name;
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    const uint32_t all = algorithms_ ? kAllAlgorithms : kAllProtocols;
    if (exclude) {
      *out = all & ~bits;
    } else if (algorithms_ && onlyIgnored) {
      *out = all;
      note(std::string(var()) + ": " + quoted(list) + " names no algorithm braid has: no constraint for " +
           (collText.empty() ? std::string("any collective") : std::string(trim(collText))));
    } else {
      *out = bits;
    }
    return true;
  }

  bool lookup(std::string_view name, uint32_t* bit, bool* ignored) {
    if (!algorithms_) {
      for (Protocol p : kProtocols)
        if (sameNoCase(name, protocolName(p))) {
          *bit = protocolBit(p);
          return true;
        }
      return false;
    }
    const auto& all = algorithms();
    for (size_t i = 0; i < all.size(); ++i)
      if (sameNoCase(name, all[i]->name)) {
        *bit = 1u << i;
        return true;
      }
    for (const char* nccl : kNcclOnlyAlgorithms)
      if (sameNoCase(name, nccl)) {
        *ignored = true;
        std::string why = std::string(var()) + ": " + quoted(name) + " accepted and ignored: braid has no " + nccl + " algorithm";
        if (sameNoCase(nccl, "NVLS") || sameNoCase(nccl, "NVLSTree")) why += " (it never uses NVLink multicast)";
        note(why + "; braid's are " + describeAlgorithms(kAllAlgorithms));
        return true;
      }
    return false;
  }

  bool algorithms_;
  std::string_view whole_;
  std::vector<std::string>* notes_;
  std::string* error_;
  std::vector<std::string> pendingNotes_;
};

}  // namespace

const std::vector<Coll>& tunableCollectives() {
  static const std::vector<Coll> all = {Coll::Broadcast, Coll::Reduce,   Coll::AllGather, Coll::ReduceScatter, Coll::AllReduce,
                                        Coll::AlltoAll,  Coll::Gather,   Coll::Scatter,   Coll::SendRecv};
  return all;
}

bool parseAlgorithmList(std::string_view text, TuningConstraints* out, std::vector<std::string>* notes, std::string* error) {
  std::vector<std::string> ignored;
  return ListParser(true, text, notes ? notes : &ignored, error).parse(out);
}

bool parseProtocolList(std::string_view text, TuningConstraints* out, std::string* error) {
  std::vector<std::string> none;
  return ListParser(false, text, &none, error).parse(out);
}

bool parseTuningEnv(const char* ncclAlgo, const char* ncclProto, TuningConstraints* out, std::vector<std::string>* notes,
                    std::string* error) {
  TuningConstraints next = *out;
  std::vector<std::string> lines;
  if (ncclAlgo && !parseAlgorithmList(ncclAlgo, &next, &lines, error)) return false;
  if (ncclProto && !parseProtocolList(ncclProto, &next, error)) return false;
  *out = next;
  if (notes) notes->insert(notes->end(), lines.begin(), lines.end());
  return true;
}

std::string describeAlgorithms(AlgorithmSet set) {
  std::string s;
  const auto& all = algorithms();
  for (size_t i = 0; i < all.size(); ++i)
    if (set & (1u << i)) s += (s.empty() ? "" : ", ") + std::string(all[i]->name);
  return s.empty() ? "none" : s;
}

std::string describeProtocols(ProtocolSet set) {
  std::string s;
  for (Protocol p : kProtocols)
    if (set & protocolBit(p)) s += (s.empty() ? "" : ", ") + std::string(protocolName(p));
  return s.empty() ? "none" : s;
}

}  // namespace braid::algo
