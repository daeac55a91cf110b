#include "perf/perf_json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace braid::perf {
namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string number(double value) {
  if (!std::isfinite(value)) return "null";  // JSON has no NaN or infinity
  char text[40];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

std::string number(long long value) { return std::to_string(value); }

// Builds "{"k": v, ...}" from already-encoded values.
class Object {
 public:
  Object& add(const std::string& key, const std::string& encoded) {
    body_ += (body_.empty() ? "" : ", ") + quoted(key) + ": " + encoded;
    return *this;
  }
  std::string str() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

std::string list(const std::vector<std::string>& encoded, const std::string& indent) {
  if (encoded.empty()) return "[]";
  std::string out = "[\n";
  for (size_t i = 0; i < encoded.size(); ++i) out += indent + "  " + encoded[i] + (i + 1 < encoded.size() ? ",\n" : "\n");
  return out + indent + "]";
}

std::string measurement(const Measurement& m, bool checked) {
  return Object()
      .add("time", number(m.timeUs))
      .add("alg_bw", number(m.algBw))
      .add("bus_bw", number(m.busBw))
      .add("nwrong", checked ? number(static_cast<long long>(m.wrong)) : "null")
      .str();
}

}  // namespace

std::string reportJson(const PerfReport& r) {
  const PerfOptions& o = r.options;
  std::vector<std::string> args, devices, rows;
  for (const auto& a : r.args) args.push_back(quoted(a));
  for (const auto& d : r.ranks)
    devices.push_back(Object()
                          .add("rank", number(static_cast<long long>(d.rank)))
                          .add("pid", number(static_cast<long long>(d.pid)))
                          .add("hostname", quoted(d.host))
                          .add("device", number(static_cast<long long>(d.device)))
                          .add("device_hex", quoted(d.busId))
                          .add("device_info", quoted(d.deviceName))
                          .str());
  for (const auto& row : r.rows)
    rows.push_back(Object()
                       .add("size", number(static_cast<long long>(row.bytes)))
                       .add("count", number(static_cast<long long>(row.count)))
                       .add("type", quoted(row.type))
                       .add("redop", quoted(row.op))
                       .add("root", number(static_cast<long long>(row.root)))
                       .add("out_of_place", measurement(row.outOfPlace, row.checked))
                       .add("in_place", measurement(row.inPlace, row.checked))
                       .str());
  Object config;
  config.add("collective", quoted(check::collectiveName(o.coll)))
      .add("nranks", number(static_cast<long long>(r.nRanks)))
      .add("ranks_as", quoted(r.ranksAs))
      .add("memory", quoted(r.memory))
      .add("minimum_bytes", number(static_cast<long long>(o.minBytes)))
      .add("maximum_bytes", number(static_cast<long long>(o.maxBytes)));
  if (o.stepFactor > 1)
    config.add("step_factor", number(static_cast<long long>(o.stepFactor)));
  else
    config.add("step_bytes", number(static_cast<long long>(o.stepBytes)));
  config.add("warmup_iters", number(static_cast<long long>(o.warmupIters)))
      .add("iterations", number(static_cast<long long>(o.iters)))
      .add("aggregated_iterations", number(static_cast<long long>(o.aggIters)))
      .add("validation", number(static_cast<long long>(o.checkIters)))
      .add("graph", number(static_cast<long long>(o.graphLaunches)))
      .add("blocking_collectives", o.blocking ? "true" : "false")
      .add("average", number(static_cast<long long>(o.average)));
  std::string out = "{\n";
  auto field = [&out](const std::string& key, const std::string& encoded, bool last = false) {
    out += "  " + quoted(key) + ": " + encoded + (last ? "\n" : ",\n");
  };
  field("version", "2");
  field("program", quoted("braid-perf"));
  field("start_time", quoted(r.startTime));
  field("args", list(args, "  "));
  field("nccl_version", number(static_cast<long long>(r.ncclVersion)));
  field("library", quoted(r.library));
  field("config", config.str());
  field("devices", list(devices, "  "));
  field("results", list(rows, "  "));
  field("out_of_bounds", Object()
                             .add("count", number(static_cast<long long>(r.failedResults)))
                             .add("okay", r.failedResults == 0 ? "true" : "false")
                             .str());
  field("average_bus_bandwidth", Object().add("bandwidth", number(r.avgBusBw)).str());
  field("end_time", quoted(r.endTime), true);
  return out + "}\n";
}

bool writeReportJson(const std::string& path, const PerfReport& report, std::string* error) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  std::string text = reportJson(report);
  bool ok = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  int writeErrno = errno;
  if (std::fclose(file) != 0 && ok) {
    ok = false;
    writeErrno = errno;
  }
  if (!ok) *error = "cannot write " + path + ": " + std::strerror(writeErrno);
  return ok;
}

std::string nowString() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  char text[64] = "";
  if (localtime_r(&now, &local) != nullptr) std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

}  // namespace braid::perf
