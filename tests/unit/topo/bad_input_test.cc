// Bad topology input: each case gets an error naming the file and line, or a warning and the
// documented fallback (topo/README.md, "Bad input").
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "test_data.h"
#include "topo/paths.h"
#include "topo/search.h"
#include "topo/system.h"

namespace braid::topo {
namespace {

struct Outcome {
  bool ok;
  std::string error;
  System sys;
  std::string diagnostics;
};

Outcome build(const std::string& text) {
  Outcome o;
  XmlElement root;
  o.ok = parseXml(text, "bad.xml", &root, &o.error) && buildSystem(root, "bad.xml", &o.sys, &o.error);
  for (const auto& d : o.sys.diagnostics) o.diagnostics += d.text + "\n";
  return o;
}

std::string wrap(const std::string& cpuBody, const std::string& cpuAttrs = "numaid=\"0\"") {
  return "<system version=\"1\">\n<cpu " + cpuAttrs + ">\n" + cpuBody + "\n</cpu>\n</system>\n";
}

const std::string kGpu =
    "<pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"
    "<gpu dev=\"0\" sm=\"80\" rank=\"0\" gdr=\"1\"/></pci>";

TEST(TopoBadInput, StructuralErrorsNameFileAndLine) {
  Outcome o = build("<topology version=\"2.0\"/>");
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error, "bad.xml:1: the root element is <topology>, expected <system> (an NCCL topology file)");

  o = build(wrap("<pci class=\"0x030200\"/>"));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error, "bad.xml:3: <pci> has no busid attribute");

  o = build(wrap("<pci busid=\"0000:zz:00.0\"/>"));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error, "bad.xml:3: busid=\"0000:zz:00.0\" of <pci> is not a PCI address (expected dddd:bb:dd.f)");

  o = build(wrap(kGpu + "\n" + kGpu));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error, "bad.xml:4: busid 0000:01:00.0 appears twice (first at line 3)");
}

TEST(TopoBadInput, UnknownElementsAndAttributesAreWarnings) {
  Outcome o = build("<system version=\"1\" flavour=\"x\">\n<cpu numaid=\"0\" colour=\"red\">\n" + kGpu +
                    "\n<widget/>\n</cpu>\n<rack/>\n</system>");
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.sys.gpus.size(), 1u);
  EXPECT_NE(o.diagnostics.find("bad.xml:4: unknown element <widget> inside <cpu> ignored"), std::string::npos) << o.diagnostics;
  EXPECT_NE(o.diagnostics.find("bad.xml:6: unknown element <rack> inside <system> ignored"), std::string::npos);
  EXPECT_NE(o.diagnostics.find("bad.xml:2: unknown attribute colour of <cpu> ignored"), std::string::npos);
  EXPECT_NE(o.diagnostics.find("bad.xml:1: unknown attribute flavour of <system> ignored"), std::string::npos);
}

TEST(TopoBadInput, OutOfRangeAttributesUseDefaults) {
  Outcome o = build(wrap(
      "<pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"99 GT/s\" link_width=\"64\">\n"
      "<gpu dev=\"-3\" sm=\"5\" rank=\"x\" gdr=\"7\"><nvlink target=\"0000:02:00.0\" count=\"0\"/></gpu></pci>\n"
      "<nic><net name=\"ib0\" dev=\"0\" speed=\"fast\" maxconn=\"-1\"/></nic>",
      "numaid=\"99999999\" affinity=\"zz,ff\""));
  ASSERT_TRUE(o.ok) << o.error;
  const Node& g = o.sys.node(o.sys.gpus[0]);
  EXPECT_EQ(g.dev, 0);   // renumbered from the free devs
  EXPECT_EQ(g.sm, 0);
  EXPECT_EQ(g.rank, -1);
  EXPECT_FALSE(g.gdr);
  EXPECT_NEAR(g.upBw, 12.0, 1e-9);  // unknown speed and width: Gen3 x16
  EXPECT_EQ(o.sys.node(o.sys.cpus[0]).numaId, -1);
  EXPECT_EQ(o.sys.node(o.sys.cpus[0]).affinity, "");
  EXPECT_DOUBLE_EQ(o.sys.node(o.sys.nets[0]).speedMbps, 0);  // NCCL's 10 Gb/s default then applies
  for (const char* want :
       {"bad.xml:2: numaid=\"99999999\" of <cpu> is out of range [-1, 65535]; using -1",
        "bad.xml:2: affinity=\"zz,ff\" of <cpu> is not a hex CPU mask", "link_speed=\"99 GT/s\" is not a PCIe speed",
        "link_width=\"64\" of <pci> is out of range", "bad.xml:4: dev=\"-3\" of <gpu> is out of range",
        "sm=\"5\" of <gpu> is out of range", "rank=\"x\" of <gpu> is not an integer",
        "bad.xml:4: <nvlink> has no valid count (1..64); ignored", "speed=\"fast\" of <net> is not a number"})
    EXPECT_NE(o.diagnostics.find(want), std::string::npos) << want << "\n" << o.diagnostics;
}

TEST(TopoBadInput, NvlinksToNowhereAndOddClasses) {
  Outcome o = build(wrap(
      "<pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"90\">\n"
      "<nvlink target=\"0000:77:00.0\" count=\"2\" tclass=\"0x030200\"/>\n"
      "<nvlink target=\"not-a-bus\" count=\"2\" tclass=\"0x068000\"/>\n"
      "<nvlink target=\"0000:02:00.0\" count=\"2\" tclass=\"0x099999\"/>\n"
      "<nvlink target=\"0000:02:00.0\" count=\"2\" tclass=\"0x030200\"/>\n"
      "</gpu></pci>\n<pci busid=\"0000:02:00.0\" class=\"0x020000\"/>\n"
      "<pci busid=\"0000:03:00.0\" class=\"0x060400\"><gpu dev=\"0\"/></pci>"));
  ASSERT_TRUE(o.ok) << o.error;
  for (const char* want : {"bad.xml:4: nvlink target 0000:77:00.0 is not in the file; ignored",
                           "bad.xml:5: nvlink target \"not-a-bus\" is not a PCI address; ignored",
                           "bad.xml:6: nvlink tclass \"0x099999\" is neither a GPU, an NVSwitch nor a CPU; ignored",
                           "bad.xml:7: nvlink target 0000:02:00.0 is not a GPU; ignored",
                           "<gpu> inside a <pci> of class 0x060400", "GPU dev 0 appears twice; renumbering this one"})
    EXPECT_NE(o.diagnostics.find(want), std::string::npos) << want << "\n" << o.diagnostics;
  EXPECT_EQ(o.sys.gpus.size(), 2u);
  EXPECT_EQ(o.sys.hosts[0].nvs, -1);
}

TEST(TopoBadInput, OtherVersionsAndFormatsAreReadWithAWarning) {
  Outcome o = build("<system version=\"2\">\n<cpu numaid=\"0\">" + kGpu + "</cpu></system>");
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_NE(o.diagnostics.find("bad.xml:1: <system version=\"2\">: braid reads version 1; reading it anyway"),
            std::string::npos);
}

// Every prefix of a real file: an error that names the file and a line, or a clean parse; never
// a crash. (The only clean prefixes are the whole file and the file without trailing newline.)
TEST(TopoBadInput, EveryTruncationOfARealFile) {
  std::ifstream f(testing::xmlPath("perlmutter-a100-4gpu.xml"));
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  std::regex where("^cut\\.xml:[0-9]+: .+");
  size_t clean = 0;
  for (size_t n = 0; n < text.size(); ++n) {
    XmlElement root;
    std::string error;
    System sys;
    if (parseXml(std::string_view(text).substr(0, n), "cut.xml", &root, &error) &&
        buildSystem(root, "cut.xml", &sys, &error)) {
      ++clean;
      continue;
    }
    ASSERT_TRUE(std::regex_match(error, where)) << n << ": " << error;
  }
  EXPECT_LE(clean, 1u);
}

TEST(TopoBadInput, NotXmlAtAll) {
  for (std::string text : {std::string("# Real machine topologies\n\nsome text <b>bold</b>\n"),
                           std::string("\x01\x02<\xff\xfe>\x00zz", 9), std::string("<<<<>>>>"),
                           std::string("<system version=\"1\"><cpu numaid=\"0\"></system")}) {
    Outcome o = build(text);
    EXPECT_FALSE(o.ok);
    EXPECT_EQ(o.error.rfind("bad.xml:", 0), 0u) << o.error;
  }
}

}  // namespace
}  // namespace braid::topo
