#include <gtest/gtest.h>

#include "topo/xml.h"

namespace braid::topo {
namespace {

XmlElement parseOk(const std::string& text) {
  XmlElement root;
  std::string error;
  EXPECT_TRUE(parseXml(text, "t.xml", &root, &error)) << error;
  return root;
}

std::string parseError(const std::string& text) {
  XmlElement root;
  std::string error;
  EXPECT_FALSE(parseXml(text, "t.xml", &root, &error)) << "accepted: " << text;
  return error;
}

TEST(TopoXml, ElementsAttributesAndLines) {
  XmlElement r = parseOk("<?xml version=\"1.0\"?>\n<system version=\"1\">\n  <cpu numaid='0' a=\"x&amp;y\">\n"
                         "    <pci busid=\"0000:01:00.0\"/>\n  </cpu>\n</system>");
  EXPECT_EQ(r.name, "system");
  EXPECT_EQ(r.line, 2);
  ASSERT_EQ(r.children.size(), 1u);
  const XmlElement& cpu = r.children[0];
  EXPECT_EQ(cpu.line, 3);
  EXPECT_EQ(cpu.attrOr("numaid", ""), "0");
  EXPECT_EQ(cpu.attrOr("a", ""), "x&y");
  ASSERT_EQ(cpu.children.size(), 1u);
  EXPECT_EQ(cpu.children[0].line, 4);
  EXPECT_EQ(*cpu.children[0].attr("busid"), "0000:01:00.0");
  EXPECT_EQ(r.countElements(), 3u);
}

TEST(TopoXml, CommentsEverywhereAndNoTrailingNewline) {
  // AWS files: a comment before the root, comments after closing tags, no final newline.
  XmlElement r = parseOk("<!-- head\n comment -->\n<system version=\"1\">\n  <cpu>  <!-- c -->\n"
                         "    <pci busid=\"a\"/> <!-- GPU 0 -->\n  </cpu> <!-- end -->\n</system>");
  ASSERT_EQ(r.children.size(), 1u);
  EXPECT_EQ(r.children[0].children.size(), 1u);
}

TEST(TopoXml, WriterUsesNcclLayoutAndRoundTrips) {
  XmlElement r = parseOk("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"x\" q='a\"b'/></cpu></system>");
  std::string text = writeXml(r);
  EXPECT_EQ(text,
            "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"x\" q=\"a&quot;b\"/>\n  </cpu>\n</system>\n");
  XmlElement again = parseOk(text);
  EXPECT_EQ(writeXml(again), text);
}

TEST(TopoXml, ErrorsNameFileAndLine) {
  EXPECT_EQ(parseError("<system>\n<cpu>\n</system>"), "t.xml:3: closing tag </system> does not match <cpu> opened at line 2");
  EXPECT_EQ(parseError("<system>\n  <cpu numaid=\"0\">\n"), "t.xml:2: unexpected end of file: <cpu> is not closed");
  EXPECT_EQ(parseError("<system>\n<cpu numaid=\"0></cpu></system>"),
            "t.xml:2: '<' inside the value of attribute numaid");
  EXPECT_EQ(parseError("<system a=\"1\" a=\"2\"/>"), "t.xml:1: attribute a appears twice in <system>");
  EXPECT_EQ(parseError(""), "t.xml:1: no root element");
  EXPECT_EQ(parseError("<a/><b/>"), "t.xml:1: more than one root element");
  EXPECT_EQ(parseError("hello <a/>"), "t.xml:1: text outside the root element");
  EXPECT_EQ(parseError("<a>\n<!-- never closed"), "t.xml:2: unexpected end of file inside a comment");
  EXPECT_EQ(parseError("<a b=\"&bogus;\"/>"), "t.xml:1: bad character reference in attribute b: \"&bogus;\"");
  EXPECT_EQ(parseError("<a b=c/>"), "t.xml:1: attribute b of <a> has no quoted value");
  EXPECT_EQ(parseError("</a>"), "t.xml:1: closing tag </a> without an open element");
}

TEST(TopoXml, LimitsStopHostileInput) {
  XmlLimits limits;
  limits.maxDepth = 8;
  std::string deep;
  for (int i = 0; i < 20; ++i) deep += "<a>";
  XmlElement r;
  std::string error;
  EXPECT_FALSE(parseXml(deep, "d.xml", &r, &error, limits));
  EXPECT_NE(error.find("nested deeper than 8"), std::string::npos) << error;

  limits = XmlLimits{};
  limits.maxElements = 10;
  std::string wide = "<a>";
  for (int i = 0; i < 20; ++i) wide += "<b/>";
  wide += "</a>";
  EXPECT_FALSE(parseXml(wide, "w.xml", &r, &error, limits));
  EXPECT_NE(error.find("more than 10 elements"), std::string::npos) << error;

  limits = XmlLimits{};
  limits.maxValueLength = 16;
  EXPECT_FALSE(parseXml("<a b=\"" + std::string(100, 'x') + "\"/>", "v.xml", &r, &error, limits));
  EXPECT_NE(error.find("longer than 16"), std::string::npos) << error;
}

TEST(TopoXml, FileErrorsNameTheFile) {
  XmlElement r;
  std::string error;
  EXPECT_FALSE(parseXmlFile("/nonexistent/topo.xml", &r, &error));
  EXPECT_NE(error.find("/nonexistent/topo.xml: cannot open"), std::string::npos) << error;
  EXPECT_FALSE(writeXmlFile("/nonexistent/dir/out.xml", r, &error));
  EXPECT_NE(error.find("/nonexistent/dir/out.xml"), std::string::npos) << error;
}

TEST(TopoXml, SetAndRemoveAttributes) {
  XmlElement e;
  e.name = "x";
  e.setAttr("a", "1");
  e.setAttr("b", "2");
  e.setAttr("a", "3");
  EXPECT_EQ(e.attrs.size(), 2u);
  EXPECT_EQ(e.attrOr("a", ""), "3");
  e.removeAttr("a");
  EXPECT_EQ(e.attr("a"), nullptr);
  EXPECT_EQ(e.attrOr("a", "dflt"), "dflt");
}

}  // namespace
}  // namespace braid::topo
