// The verifier's simulation: lanes advance slice by slice through bounded FIFOs, and each
// step moves symbolic values when its last slice goes through.
//
// A step's values are computed when its last slice passes: by then every slice it
// receives has arrived (so the sender has finished and left the message's values in the
// FIFO), and no other lane of the rank touches the same memory (checkRaces reports
// lanes that do), so when exactly a step's values are computed doesn't matter.
#include <deque>

#include "algo/verifier_internal.h"

namespace braid::algo::verifier_detail {

namespace {

struct LaneRun {
  int rank = 0, lane = 0;
  size_t step = 0;
  uint64_t slicesDone = 0;
  bool done = false, queued = false;
  int waitConn = -1;
  bool waitData = false;  // waiting for a slice to arrive (else for room to send)
};

struct ConnRun {
  uint64_t pushed = 0, popped = 0;  // slices
  int senderRun = -1, receiverRun = -1;
  int recvWaiter = -1, sendWaiter = -1;
  std::deque<Pieces> messages;  // values of completed sends not yet received
};

class Simulation {
 public:
  Simulation(Model& model, const std::vector<RankPlan>& plans, const Wiring& wiring, const VerifyOptions& options,
             Errors& errors)
      : model_(model), plans_(plans), wiring_(wiring), options_(options), errors_(errors) {
    for (int r = 0; r < model.nRanks; ++r) all_.set(r);
    runOf_.resize(model.nRanks);
    for (int r = 0; r < model.nRanks; ++r) {
      for (int l = 0; l < static_cast<int>(plans[r].lanes.size()); ++l) {
        runOf_[r].push_back(static_cast<int>(runs_.size()));
        runs_.push_back({.rank = r, .lane = l});
      }
    }
    conns_.resize(wiring.connections.size());
    for (size_t c = 0; c < conns_.size(); ++c) {
      const Connection& wc = wiring.connections[c];
      if (wc.senderLane >= 0) conns_[c].senderRun = runOf_[wc.sender][wc.senderLane];
      if (wc.receiverLane >= 0) conns_[c].receiverRun = runOf_[wc.receiver][wc.receiverLane];
    }
  }

  void run() {
    for (size_t i = 0; i < runs_.size(); ++i) enqueue(static_cast<int>(i));
    while (!ready_.empty() && !errors_.full()) {
      const int id = ready_.front();
      ready_.pop_front();
      runs_[id].queued = false;
      advance(id);
    }
    if (!errors_.full()) reportDeadlock();
  }

 private:
  uint64_t slicesOf(uint64_t count) const {
    if (options_.sliceElems == 0) return 1;
    return std::max<uint64_t>(1, (count + options_.sliceElems - 1) / options_.sliceElems);
  }
  uint64_t capacity() const { return std::max<uint32_t>(1, options_.fifoSlices); }

  void enqueue(int id) {
    if (id < 0 || runs_[id].queued || runs_[id].done) return;
    runs_[id].queued = true;
    ready_.push_back(id);
  }

  // Runs one lane until it finishes or blocks.
  void advance(int id) {
    LaneRun& run = runs_[id];
    const auto& steps = plans_[run.rank].lanes[run.lane].steps;
    while (run.step < steps.size()) {
      const Step& s = steps[run.step];
      const StepConns& sc = wiring_.steps[run.rank][run.lane][run.step];
      const uint64_t slices = slicesOf(s.count);
      while (run.slicesDone < slices) {
        if (sc.recv >= 0 && conns_[sc.recv].pushed == conns_[sc.recv].popped) return block(id, sc.recv, true);
        if (sc.send >= 0 && conns_[sc.send].pushed - conns_[sc.send].popped >= capacity())
          return block(id, sc.send, false);
        if (run.slicesDone + 1 == slices) execute(run, s, sc);
        if (sc.recv >= 0) {
          ++conns_[sc.recv].popped;
          wake(conns_[sc.recv].sendWaiter);
        }
        if (sc.send >= 0) {
          ++conns_[sc.send].pushed;
          wake(conns_[sc.send].recvWaiter);
        }
        ++run.slicesDone;
      }
      ++run.step;
      run.slicesDone = 0;
    }
    run.done = true;
    run.waitConn = -1;
  }

  void block(int id, int conn, bool forData) {
    runs_[id].waitConn = conn;
    runs_[id].waitData = forData;
    (forData ? conns_[conn].recvWaiter : conns_[conn].sendWaiter) = id;
  }
  void wake(int& waiter) {
    const int id = waiter;
    waiter = -1;
    enqueue(id);
  }

  // --- values ---
  std::string here(const LaneRun& run) const {
    return where(model_, plans_, {run.rank, run.lane, static_cast<int>(run.step)});
  }
  std::string elems(uint64_t pos, uint64_t len) const {
    return "elements [" + std::to_string(pos) + ".." + std::to_string(pos + len) + ")";
  }
  std::string bufName(uint16_t buf) const {
    const std::string text = bufRange(model_, buf, 0, 0);
    return text.substr(0, text.find('['));
  }
  std::string desc(const Sym& sym, uint64_t len) const {
    return describe(sym, len, model_.nRanks, [this](uint16_t b) { return bufName(b); });
  }

  Pieces readSrc(const LaneRun& run, const Step& s) {
    const RankModel& rm = model_.ranks[run.rank];
    const BufferView& v = rm.buffers[s.src];
    Pieces raw = rm.regions[v.region].read(v.offset + s.srcOff, s.count);
    Pieces out;
    uint64_t pos = 0;
    for (const Piece& p : raw) {
      Sym sym = p.sym;
      auto range = [&] { return bufRange(model_, s.src, s.srcOff + pos, p.len); };
      if (sym.kind == Sym::Kind::Undef) {
        errors_.add(here(run) + ": reads " + range() + " before anything was written there");
        sym = Sym::poison();
      } else if (v.isInput && sym.kind != Sym::Kind::Poison) {
        const bool unmodified = sym.kind == Sym::Kind::Raw && sym.rank == run.rank && sym.buf == s.src &&
                                sym.delta == static_cast<int64_t>(s.srcOff + pos);
        if (!unmodified) {
          errors_.add(here(run) + ": reads " + range() + " after it was overwritten; it holds " + desc(sym, p.len));
          sym = Sym::poison();
        } else if (model_.reduces) {  // the executor pre-multiplies what it reads from an input
          RankSet me;
          me.set(run.rank);
          sym = Sym::sum(me, sym.delta, 0);
        }
      }
      appendPiece(out, p.len, sym);
      pos += p.len;
    }
    return out;
  }

  Pieces reduce(const LaneRun& run, const Pieces& received, const Pieces& local) {
    Pieces out;
    zipPieces(received, local, [&](uint64_t pos, uint64_t len, const Sym& a, const Sym& b) {
      auto bad = [&](const std::string& why) {
        errors_.add(here(run) + ": " + elems(pos, len) + " " + why);
        appendPiece(out, len, Sym::poison());
      };
      if (a.kind == Sym::Kind::Poison || b.kind == Sym::Kind::Poison) return appendPiece(out, len, Sym::poison());
      if (a.kind != Sym::Kind::Sum || b.kind != Sym::Kind::Sum) {
        const Sym& odd = a.kind != Sym::Kind::Sum ? a : b;
        return bad("add " + desc(odd, len) + ", which was not read from an input buffer (no pre-multiply)");
      }
      if (a.finals || b.finals) return bad("add to a value that already had kFinal applied");
      if (a.delta != b.delta)
        return bad("add input index " + std::to_string(a.delta) + " (received) to input index " +
                   std::to_string(b.delta));
      const RankSet twice = a.ranks & b.ranks;
      if (twice.any()) return bad("count the contributions of ranks " + formatRanks(twice, model_.nRanks) + " twice");
      appendPiece(out, len, Sym::sum(a.ranks | b.ranks, a.delta, 0));
    });
    return out;
  }

  Pieces finalize(const LaneRun& run, const Pieces& value) {
    Pieces out;
    uint64_t pos = 0;
    for (const Piece& p : value) {
      Sym sym = p.sym;
      auto bad = [&](const std::string& why) {
        errors_.add(here(run) + ": kFinal on " + elems(pos, p.len) + " " + why);
        sym = Sym::poison();
      };
      if (sym.kind == Sym::Kind::Raw) {
        bad("applies the post-op to " + desc(sym, p.len) + ", which was not read from an input buffer");
      } else if (sym.kind == Sym::Kind::Sum) {
        if (sym.finals > 0)
          bad("applies it a second time");
        else if (sym.ranks != all_)
          bad("applies it to a partial sum: ranks " + formatRanks(all_ & ~sym.ranks, model_.nRanks) + " are missing");
        else
          sym.finals = 1;
      }
      appendPiece(out, p.len, sym);
      pos += p.len;
    }
    return out;
  }

  void execute(const LaneRun& run, const Step& s, const StepConns& sc) {
    Pieces value;
    if (sc.recv >= 0) {
      ConnRun& c = conns_[sc.recv];
      value = std::move(c.messages.front());
      c.messages.pop_front();
    }
    if (s.src != kNoBuf) {
      Pieces local = readSrc(run, s);
      value = sc.recv >= 0 ? reduce(run, value, local) : std::move(local);
    }
    if (s.flags & kFinal) value = finalize(run, value);
    if (s.dst != kNoBuf) {
      RankModel& rm = model_.ranks[run.rank];
      const BufferView& v = rm.buffers[s.dst];
      rm.regions[v.region].write(v.offset + s.dstOff, value);
    }
    if (sc.send >= 0) conns_[sc.send].messages.push_back(std::move(value));
  }

  // --- deadlock ---
  std::string describeWait(int id) const {
    const LaneRun& run = runs_[id];
    const Connection& c = wiring_.connections[run.waitConn];
    const std::string ch = " on channel " + std::to_string(c.channel);
    if (run.waitData) return here(run) + " waits for data from rank " + std::to_string(c.sender) + ch;
    return here(run) + " waits for room to send to rank " + std::to_string(c.receiver) + ch + " (FIFO full, " +
           std::to_string(capacity()) + " slices)";
  }

  void reportDeadlock() {
    int blocked = 0, start = -1;
    for (size_t i = 0; i < runs_.size(); ++i) {
      if (runs_[i].done) continue;
      ++blocked;
      if (start < 0) start = static_cast<int>(i);
    }
    if (blocked == 0) return;
    // Each blocked lane waits on the lane at the other end of one connection: follow the
    // waits until one repeats (a cycle) or ends at a lane that isn't blocked.
    std::vector<int> path, seenAt(runs_.size(), -1);
    int id = start;
    while (id >= 0 && !runs_[id].done && seenAt[id] < 0) {
      seenAt[id] = static_cast<int>(path.size());
      path.push_back(id);
      const ConnRun& c = conns_[runs_[id].waitConn];
      id = runs_[id].waitData ? c.senderRun : c.receiverRun;
    }
    const bool cycle = id >= 0 && !runs_[id].done && seenAt[id] >= 0;
    const size_t from = cycle ? static_cast<size_t>(seenAt[id]) : 0;
    std::string text = "deadlock: " + std::to_string(blocked) + " lanes blocked; " +
                       (cycle ? "cycle of waits: " : "chain of waits: ");
    for (size_t i = from; i < path.size(); ++i) text += (i > from ? " -> " : "") + describeWait(path[i]);
    if (cycle)
      text += " -> back to rank " + std::to_string(runs_[id].rank) + " lane " + std::to_string(runs_[id].lane);
    else
      text += id < 0 ? " -> no lane serves that connection" : " -> a lane that has finished";
    errors_.add(text);
  }

  Model& model_;
  const std::vector<RankPlan>& plans_;
  const Wiring& wiring_;
  const VerifyOptions& options_;
  Errors& errors_;
  RankSet all_;
  std::vector<std::vector<int>> runOf_;
  std::vector<LaneRun> runs_;
  std::vector<ConnRun> conns_;
  std::deque<int> ready_;
};

}  // namespace

void simulate(Model& model, const std::vector<RankPlan>& plans, const Wiring& wiring, const VerifyOptions& options,
              Errors& errors) {
  Simulation sim(model, plans, wiring, options, errors);
  sim.run();
}

}  // namespace braid::algo::verifier_detail
