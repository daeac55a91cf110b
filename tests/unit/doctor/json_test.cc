// The report's JSON: string escaping (quotes, control characters, UTF-8 kept or replaced),
// every field present for a report with one of each thing, and the validator's own ability to
// fail (so that the schema test means something).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "json_check.h"
#include "report.h"

namespace braid::doctor::test {
namespace {

std::string parsedString(const std::string& literal) {
  Json j;
  std::string error;
  EXPECT_TRUE(parseJson(literal, &j, &error)) << error << " in " << literal;
  EXPECT_EQ(j.type, Json::String);
  return j.text;
}

TEST(DoctorJson, StringsRoundTripAndStayValidUtf8) {
  std::string controls;
  for (int c = 1; c < 0x20; ++c) controls.push_back(static_cast<char>(c));
  controls += "\x7f\"\\/";
  EXPECT_EQ(parsedString(jsonString(controls)), controls);
  EXPECT_EQ(jsonString("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(jsonString(std::string("\x01", 1)), "\"\\u0001\"");
  std::string nul("a\0b", 3);
  EXPECT_EQ(parsedString(jsonString(nul)), nul);
  // Valid UTF-8 passes as it is: 2, 3 and 4 byte sequences.
  std::string utf8 = "\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80";
  EXPECT_EQ(jsonString(utf8), "\"" + utf8 + "\"");
  // Invalid bytes become U+FFFD: a lone continuation, a truncated sequence, an overlong '/',
  // a surrogate, a code point past U+10FFFF.
  const char* bad[] = {"\x80", "\xe2\x86", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff"};
  for (const char* b : bad) {
    std::string out = jsonString(std::string("x") + b + "y");
    std::string back = parsedString(out);  // the reader rejects invalid UTF-8, so this checks it
    EXPECT_EQ(back.front(), 'x');
    EXPECT_EQ(back.back(), 'y');
    EXPECT_NE(back.find("\xef\xbf\xbd"), std::string::npos) << out;
  }
}

Json schema() {
  std::ifstream f(BRAID_DOCTOR_SCHEMA);
  std::stringstream s;
  s << f.rdbuf();
  Json j;
  std::string error;
  EXPECT_TRUE(parseJson(s.str(), &j, &error)) << error;
  return j;
}

Report fullReport() {
  Report r;
  addFact(&r, "versions", "real NCCL", "2.28.9 (/usr/lib/libnccl.so.2)", Severity::Ok, "used");
  addFact(&r, "p2p", "GPU0->GPU1", "no peer access over PIX", Severity::Warning, "ACS \"on\"\t");
  r.blocks.push_back({"P2P capability", "     GPU0\nGPU0 X\n"});
  Figure f;
  f.section = "copies";
  f.path = "H2D pinned GPU0";
  f.unit = "GB/s";
  f.points = {{1024, 1.5}, {1 << 20, 20.25}, {1 << 26, std::nan("")}};
  f.best = 20.25;
  f.expected = 55;
  f.expectedWhy = "PCIe Gen5 x16";
  f.severity = Severity::Error;
  f.verdict = "wrong";
  r.figures.push_back(f);
  addSkip(&r, "ipc", "--skip ipc");
  r.seconds = 1.25;
  return r;
}

TEST(DoctorJson, AFullReportConformsToTheSchema) {
  RunInfo run;
  run.braidVersion = "0.1.0";
  run.parts = {{"versions", 0.1, 2, true}, {"ipc", 0, 1, false}};
  Json j;
  std::string error;
  ASSERT_TRUE(parseJson(reportJson(fullReport(), run), &j, &error)) << error;
  for (const auto& e : validate(j, schema())) ADD_FAILURE() << e;
  EXPECT_EQ(j.find("status")->text, "error");
  EXPECT_EQ(j.find("exitCode")->number, 2);
  const Json& fig = j.find("figures")->items.at(0);
  EXPECT_EQ(fig.find("points")->items.at(2).find("value")->type, Json::Null) << "NaN is written as null";
  EXPECT_EQ(j.find("facts")->items.at(1).find("verdict")->text, "ACS \"on\"\t");
}

TEST(DoctorJson, EveryFieldOfTheSchemaIsDescribed) {
  for (const auto& p : undocumented(schema())) ADD_FAILURE() << p << " has no description";
}

TEST(DoctorJson, TheValidatorRejectsWhatBreaksTheSchema) {
  RunInfo run;
  run.braidVersion = "0.1.0";
  std::string good = reportJson(fullReport(), run);
  Json s = schema();
  auto errorsFor = [&](const std::string& text) {
    Json j;
    std::string error;
    EXPECT_TRUE(parseJson(text, &j, &error)) << error;
    return validate(j, s).size();
  };
  ASSERT_EQ(errorsFor(good), 0u);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  EXPECT_GT(errorsFor(replaced("\"status\":\"error\"", "\"status\":\"bad\"")), 0u);      // enum
  EXPECT_GT(errorsFor(replaced("\"quick\":false", "\"quick\":0")), 0u);                 // type
  EXPECT_GT(errorsFor(replaced("\"quick\":false,", "")), 0u);                           // required
  EXPECT_GT(errorsFor(replaced("\"quick\":false", "\"quick\":false,\"extra\":1")), 0u);  // additionalProperties
  EXPECT_GT(errorsFor(replaced("\"unit\":\"GB/s\"", "\"unit\":5")), 0u);                // inside items
  EXPECT_GT(errorsFor(replaced("\"exitCode\":2", "\"exitCode\":2.5")), 0u);             // integer
  Json bad;
  std::string error;
  EXPECT_FALSE(parseJson("{\"a\":1,}", &bad, &error));
  EXPECT_FALSE(parseJson("\"\x01\"", &bad, &error));
  EXPECT_FALSE(parseJson("{\"a\":1,\"a\":2}", &bad, &error));
}

}  // namespace
}  // namespace braid::doctor::test
