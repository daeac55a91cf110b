// Randomized mutation of the real topology files, fed through everything that reads a topology:
// XML reader, graph builder, paths, matrix, search and writer. Bounded (BRAID_TOPO_FUZZ_SECONDS,
// default 3 s, or BRAID_TOPO_FUZZ_ITERATIONS inputs) and seeded (BRAID_TOPO_FUZZ_SEED) so a
// failure reproduces. It checks that nothing
// crashes or hangs (each input under 2 s), errors name the input, and what reads back after a
// write is the same graph. Run it under AddressSanitizer to find leaks and overruns.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "test_data.h"
#include "topo/matrix.h"
#include "topo/paths.h"
#include "topo/search.h"
#include "topo/system.h"

namespace braid::topo {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::string mutate(std::string s) {
    int n = 1 + static_cast<int>(pick(4));
    for (int i = 0; i < n && !s.empty(); ++i) {
      size_t at = pick(s.size());
      switch (pick(8)) {
        case 0: s[at] = interesting(); break;                       // replace a byte
        case 1: s.insert(at, 1, interesting()); break;              // insert a byte
        case 2: s.erase(at, 1 + pick(16)); break;                   // delete a span
        case 3: s.insert(at, s.substr(pick(s.size()), pick(200))); break;  // duplicate a span
        case 4: s.resize(at); break;                                // truncate
        case 5: s.insert(at, snippet()); break;                     // insert a plausible element
        case 6: s[at] = static_cast<char>(pick(256)); break;         // any byte
        case 7: {                                                   // change a number
          size_t q = s.find('"', at);
          if (q != std::string::npos && q + 1 < s.size()) s.insert(q + 1, number());
          break;
        }
      }
    }
    return s;
  }

 private:
  size_t pick(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  char interesting() {
    static const char chars[] = "<>/=\"' \n!-?&;x0fF:.,9";
    return chars[pick(sizeof(chars) - 1)];
  }
  std::string number() {
    static const char* nums[] = {"-1", "0", "999999999999", "0x", "1e308", "-0", "65536", "18", "ffff:ff:ff.f"};
    return nums[pick(sizeof(nums) / sizeof(nums[0]))];
  }
  std::string snippet() {
    static const char* s[] = {"<pci busid=\"0000:01:00.0\"/>",
                              "<gpu dev=\"0\" sm=\"90\"><nvlink target=\"0000:01:00.0\" count=\"4\" tclass=\"0x030200\"/></gpu>",
                              "<nvlink target=\"fffffff:ff:ff.0\" count=\"18\" tclass=\"0x068000\"/>",
                              "<nic><net name=\"x\" dev=\"0\" speed=\"1\"/></nic>", "<cpu numaid=\"3\">", "</cpu>", "</pci>",
                              "<!--", "-->", "<pcilink target=\"x\"/>", "<c2c count=\"1\" bw=\"1\"/>", "&amp;", "&#0;"};
    return s[pick(sizeof(s) / sizeof(s[0]))];
  }
  std::mt19937_64 rng_;
};

TEST(TopoFuzz, MutatedFilesNeverCrashOrHang) {
  double seconds = 3.0;
  if (const char* v = std::getenv("BRAID_TOPO_FUZZ_SECONDS")) seconds = std::atof(v);
  long maxIterations = -1;  // BRAID_TOPO_FUZZ_ITERATIONS: a fixed count, to replay a run exactly
  if (const char* v = std::getenv("BRAID_TOPO_FUZZ_ITERATIONS")) {
    maxIterations = std::atol(v);
    seconds = 1e9;
  }
  uint64_t seed = 20261129;
  if (const char* v = std::getenv("BRAID_TOPO_FUZZ_SEED")) seed = std::strtoull(v, nullptr, 10);
  std::vector<std::string> corpus;
  for (const auto& name : testing::allXmlFiles()) corpus.push_back(readFile(testing::xmlPath(name)));
  Mutator m(seed);
  std::mt19937_64 choose(seed + 1);
  auto start = std::chrono::steady_clock::now();
  long iterations = 0, parsed = 0, built = 0;
  double worstMs = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds &&
         (maxIterations < 0 || iterations < maxIterations)) {
    const std::string& base = corpus[choose() % corpus.size()];
    std::string input = m.mutate(base);
    auto t0 = std::chrono::steady_clock::now();
    XmlElement root;
    std::string error;
    System sys;
    if (!parseXml(input, "fuzz.xml", &root, &error)) {
      ASSERT_EQ(error.rfind("fuzz.xml:", 0), 0u) << error;
    } else {
      ++parsed;
      if (!buildSystem(root, "fuzz.xml", &sys, &error)) {
        ASSERT_EQ(error.rfind("fuzz.xml", 0), 0u) << error;
      } else {
        ++built;
        PathMatrix pm(sys);
        std::string text = smiMatrix(sys, pm) + ncclMatrix(sys, pm) + affinityReport(sys, pm);
        ASSERT_FALSE(text.empty());
        if (!sys.gpus.empty() && sys.gpus.size() <= 16) {
          SearchOptions opt;
          opt.maxChannels = 4;
          SearchResult r = searchRings(sys, sys.gpus, opt);
          ASSERT_FALSE(r.channels.empty());
        }
        // What is written reads back as the same graph.
        XmlElement again;
        ASSERT_TRUE(parseXml(writeXml(sys.xml), "rewritten", &again, &error)) << error;
        System back;
        ASSERT_TRUE(buildSystem(again, "rewritten", &back, &error)) << error;
        ASSERT_EQ(describeSystem(back), describeSystem(sys)) << input;
      }
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    worstMs = std::max(worstMs, ms);
    ASSERT_LT(ms, 2000.0) << "slow input:\n" << input;
    ++iterations;
  }
  std::printf("topo fuzz: seed %llu, %ld inputs, %ld parsed, %ld built, slowest %.2f ms\n",
              static_cast<unsigned long long>(seed), iterations, parsed, built, worstMs);
  EXPECT_GT(iterations, 100);
  EXPECT_GT(built, 0);
}

}  // namespace
}  // namespace braid::topo
