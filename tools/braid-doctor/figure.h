// What every part of braid-doctor hands to the report: measured figures (each beside what the
// hardware should give, with a verdict), facts it found, and what it skipped and why. The
// inventory, the measurements and the output (text, JSON, plot) meet only here.
#pragma once
#include <string>
#include <vector>

namespace braid::doctor {

enum class Severity { Ok = 0, Warning = 1, Error = 2 };

// One size of one measured path.
struct Point {
  double bytes = 0;
  double value = 0;  // in the figure's unit
};

// One measured path: "H2D pinned", "P2P copy GPU0->GPU1", "braid all-reduce 2 GPUs".
struct Figure {
  std::string section;  // "copies", "p2p", "ipc", "collectives", "storage"
  std::string path;     // what was measured, readable
  std::string unit;     // "GB/s" or "us"
  std::vector<Point> points;  // by size; may be empty for a single number
  double best = 0;            // the figure's headline (peak GB/s, or lowest us)
  double expected = 0;        // what the hardware should give in the same unit; 0 unknown
  std::string expectedWhy;    // "PCIe Gen5 x16", "HBM3e copy (read+write)"
  Severity severity = Severity::Ok;
  std::string verdict;        // one line; with the fix when a known cause fits
};

// A fact about the machine: "driver" = "580.95", with a verdict when it matters.
struct Fact {
  std::string section;  // "versions", "gpus", "topology", "p2p", "mps", "network", "storage", ...
  std::string name;
  std::string value;
  Severity severity = Severity::Ok;
  std::string verdict;
};

// A part not run: "P2P copy" - "one GPU: no pair".
struct Skip {
  std::string part;
  std::string reason;
};

// Multi-line blocks printed as they are (the topology matrix, the P2P matrix).
struct Block {
  std::string title;
  std::string text;
};

struct Report {
  std::vector<Fact> facts;
  std::vector<Block> blocks;
  std::vector<Figure> figures;
  std::vector<Skip> skipped;
  double seconds = 0;  // the doctor's own run time
};

}  // namespace braid::doctor
