// braid-perf's table and JSON output: the column layout of nccl-tests, number formatting,
// and a JSON report that parses back.
#include "perf/perf_table.h"

#include <gtest/gtest.h>

#include <string>

#include "perf/perf_json.h"

namespace braid::perf {
namespace {

TEST(PerfTable, NumbersUseAsManyDecimalsAsFit) {
  EXPECT_EQ(formatNumber(0, 7), "   0.00");
  EXPECT_EQ(formatNumber(12.345, 7), "  12.35");
  EXPECT_EQ(formatNumber(9999.99, 7), "9999.99");
  EXPECT_EQ(formatNumber(12345.6, 7), "12345.6");
  EXPECT_EQ(formatNumber(1234567, 7), "1234567");
  EXPECT_EQ(formatNumber(12345678, 7), "1.2e+07");
  EXPECT_EQ(formatNumber(0.004, 6), "  0.00");
  EXPECT_EQ(formatNumber(123.456, 6), "123.46");
  EXPECT_EQ(formatNumber(1234.5, 6), "1234.5");
  EXPECT_EQ(formatNumber(123456, 6), "123456");
}

TEST(PerfTable, RowsLineUpUnderTheHeader) {
  std::vector<std::string> header = tableHeader(false);
  ASSERT_EQ(header.size(), 3u);
  EXPECT_NE(header[0].find("out-of-place"), std::string::npos);
  EXPECT_NE(header[0].find("in-place"), std::string::npos);
  Measurement m{10.07, 0.001, 0.0015, 0};
  std::string row = rowPrefix(8, 2, "float", "sum", -1) + rowResult(m, true) + rowResult(m, false);
  EXPECT_EQ(row,
            "           8             2     float     sum      -1    10.07    0.00    0.00       0"
            "    10.07    0.00    0.00     N/A");
  // Every column of the row ends where its header label ends.
  const std::string& names = header[1];
  for (const char* label : {"size", "count", "type", "redop", "root", "#wrong"}) {
    size_t end = names.find(label) + std::string(label).size();
    ASSERT_LE(end, row.size()) << label;
    EXPECT_NE(row[end - 1], ' ') << label << " column misaligned";
    if (end < row.size()) {
      EXPECT_EQ(row[end], ' ') << label;
    }
  }
  EXPECT_EQ(header[1].size(), row.size());
  EXPECT_NE(tableHeader(true)[1].find("cputime"), std::string::npos);
}

TEST(PerfTable, ParametersRankAndFooterLines) {
  PerfOptions o;
  EXPECT_EQ(parametersLine(o),
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 67108864 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
            "validation: 1 graph: 0");
  o.stepFactor = 1;
  EXPECT_NE(parametersLine(o).find("step: 1048576(bytes)"), std::string::npos);
  RankInfo info{3, 4242, "node1", 0, "0000:1b:00", "NVIDIA H200"};
  EXPECT_EQ(rankLine(info), "#  Rank  3 Group  0 Pid   4242 on      node1 device  0 [0000:1b:00] NVIDIA H200");
  std::vector<std::string> ok = footer(0, 12.5);
  EXPECT_EQ(ok[0], "# Out of bounds values : 0 OK");
  EXPECT_EQ(ok[1], "# Avg bus bandwidth    : 12.5 ");
  EXPECT_EQ(footer(2, 0)[0], "# Out of bounds values : 2 FAILED");
  EXPECT_EQ(ok.size(), 3u);
  std::vector<std::string> notRun = footer(0, 1, 2);
  ASSERT_EQ(notRun.size(), 4u);
  EXPECT_EQ(notRun[2], "# Series not run       : 2 FAILED");
}

TEST(PerfJson, ReportHasNcclTestsKeysAndEscapes) {
  PerfReport report;
  report.args = {"braid-perf", "--json", "a \"quoted\" path\\x"};
  report.nRanks = 2;
  report.memory = "host";
  report.ranks.push_back(RankInfo{0, 1, "h", -1, "host", "host memory"});
  ResultRow row;
  row.bytes = 1024;
  row.count = 256;
  row.type = "float";
  row.op = "sum";
  row.checked = true;
  row.outOfPlace = {12.5, 0.08, 0.08, 0};
  row.inPlace = {13.0, 0.07, 0.07, 3};
  report.rows.push_back(row);
  report.failedResults = 1;
  report.avgBusBw = 0.075;
  std::string json = reportJson(report);
  for (const char* key : {"\"config\"", "\"devices\"", "\"results\"", "\"out_of_place\"", "\"in_place\"",
                          "\"alg_bw\"", "\"bus_bw\"", "\"nwrong\": 3", "\"out_of_bounds\"", "\"okay\": false",
                          "\"average_bus_bandwidth\"", "\"collective\": \"allreduce\"", "\"step_factor\": 2"})
    EXPECT_NE(json.find(key), std::string::npos) << key << " missing in\n" << json;
  EXPECT_NE(json.find(R"("a \"quoted\" path\\x")"), std::string::npos) << json;
  // Unchecked results have null, not 0, wrong elements; NaN becomes null.
  report.rows[0].checked = false;
  report.rows[0].inPlace.timeUs = 0.0 / 0.0;
  json = reportJson(report);
  EXPECT_NE(json.find("\"nwrong\": null"), std::string::npos);
  EXPECT_NE(json.find("\"time\": null"), std::string::npos);
  // Brackets and braces balance outside strings.
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (inString) {
      if (c == '\\') ++i;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') inString = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    ASSERT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
  EXPECT_FALSE(inString);
}

}  // namespace
}  // namespace braid::perf
