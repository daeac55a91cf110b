#include "perf/perf_json_read.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace braid::perf {
namespace {

double numberAt(const json::Value& v, const std::string& key, double otherwise) {
  const json::Value* m = v.find(key);
  return m != nullptr && m->type == json::Value::Number ? m->number : otherwise;
}

std::string textAt(const json::Value& v, const std::string& key) {
  const json::Value* m = v.find(key);
  return m != nullptr && m->type == json::Value::String ? m->text : std::string();
}

Measurement measurementAt(const json::Value& row, const std::string& key) {
  Measurement m;
  if (const json::Value* p = row.find(key)) {
    m.timeUs = numberAt(*p, "time", 0);
    m.algBw = numberAt(*p, "alg_bw", 0);
    m.busBw = numberAt(*p, "bus_bw", 0);
    m.wrong = static_cast<int64_t>(numberAt(*p, "nwrong", 0));
  }
  return m;
}

}  // namespace

std::string libraryLabel(const std::string& fileName, int version) {
  const std::string dotted = std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
                             std::to_string(version % 100);
  if (fileName.find("braid") != std::string::npos) return "braid";
  if (fileName.rfind("libnccl", 0) == 0) return "NCCL " + dotted;
  if (!fileName.empty()) return fileName;
  return "NCCL API " + dotted;
}

bool reportSeriesFromJson(const std::string& text, ReportSeries* out, std::string* error) {
  json::Value doc;
  if (!json::parse(text, &doc, error)) return false;
  const json::Value* results = doc.find("results");
  if (results == nullptr || results->type != json::Value::Array) {
    *error = "no \"results\" list: not a braid-perf --json report";
    return false;
  }
  *out = ReportSeries{};
  out->library = textAt(doc, "library");
  if (out->library.empty()) out->library = libraryLabel("", static_cast<int>(numberAt(doc, "nccl_version", 0)));
  if (const json::Value* config = doc.find("config")) {
    out->collective = textAt(*config, "collective");
    out->nRanks = static_cast<int>(numberAt(*config, "nranks", 0));
  }
  for (const json::Value& r : results->items) {
    ResultRow row;
    row.bytes = static_cast<size_t>(numberAt(r, "size", 0));
    row.count = static_cast<size_t>(numberAt(r, "count", 0));
    row.type = textAt(r, "type");
    row.op = textAt(r, "redop");
    row.root = static_cast<int>(numberAt(r, "root", -1));
    row.outOfPlace = measurementAt(r, "out_of_place");
    row.inPlace = measurementAt(r, "in_place");
    out->rows.push_back(std::move(row));
  }
  return true;
}

bool loadReportSeries(const std::string& path, ReportSeries* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    *error = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::string why;
  if (!reportSeriesFromJson(text, out, &why)) {
    *error = path + ": " + why;
    return false;
  }
  const size_t slash = path.rfind('/');
  out->source = slash == std::string::npos ? path : path.substr(slash + 1);
  return true;
}

}  // namespace braid::perf
