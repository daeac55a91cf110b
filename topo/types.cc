#include "topo/types.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace braid::topo {

const char* nodeTypeName(NodeType t) {
  switch (t) {
    case NodeType::Cpu: return "CPU";
    case NodeType::Pci: return "PCI";
    case NodeType::Gpu: return "GPU";
    case NodeType::Nvs: return "NVS";
    case NodeType::Nic: return "NIC";
    case NodeType::Net: return "NET";
  }
  return "?";
}

const char* linkTypeName(LinkType t) {
  switch (t) {
    case LinkType::Loc: return "LOC";
    case LinkType::Nvl: return "NVL";
    case LinkType::C2c: return "C2C";
    case LinkType::Pci: return "PCI";
    case LinkType::Sys: return "SYS";
    case LinkType::Net: return "NET";
  }
  return "?";
}

const char* ncclPathName(PathType t) {
  static const char* names[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C",
                                "PXN", "PHB", "PHB", "SYS", "NET", "DIS"};
  return names[static_cast<int>(t)];
}

const char* smiPathName(PathType t) {
  if (t == PathType::Node) return "NODE";
  if (t == PathType::Loc) return "X";
  return ncclPathName(t);
}

int ncclPathLevel(PathType t) {
  static const int levels[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 10, 11};
  return levels[static_cast<int>(t)];
}

std::optional<PathType> parsePathLevel(std::string_view text) {
  std::string up;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) up.push_back(static_cast<char>(std::toupper(c)));
  static const std::pair<const char*, PathType> names[] = {
      {"LOC", PathType::Loc}, {"NVL", PathType::Nvl}, {"NVB", PathType::Nvb}, {"C2C", PathType::C2c},
      {"PIX", PathType::Pix}, {"PXB", PathType::Pxb}, {"P2C", PathType::P2c}, {"PXN", PathType::Pxn},
      {"PHB", PathType::Phb}, {"NODE", PathType::Node}, {"SYS", PathType::Sys}, {"NET", PathType::Net}};
  for (const auto& [n, t] : names)
    if (up == n) return t;
  if (up.size() == 1 && up[0] >= '0' && up[0] <= '9') {
    static const PathType legacy[] = {PathType::Loc, PathType::Pix, PathType::Pxb, PathType::Phb, PathType::Sys};
    int v = up[0] - '0';
    return v < 5 ? legacy[v] : PathType::Sys;
  }
  return std::nullopt;
}

double nvlinkBwPerLink(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm >= 86) return 12.0;
  if (sm >= 70) return 20.0;
  return 18.0;
}

std::optional<int> pciLaneRate(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  size_t start = i;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == start) return std::nullopt;
  std::string num(s.substr(start, i - start));
  char* end = nullptr;
  double gt = std::strtod(num.c_str(), &end);
  if (end == num.c_str()) return std::nullopt;
  struct Gen { double gt; int rate; };
  static const Gen gens[] = {{2.5, 15}, {5, 30}, {8, 60}, {16, 120}, {32, 240}, {64, 480}, {128, 960}};
  for (const auto& g : gens)
    if (gt > g.gt - 0.05 && gt < g.gt + 0.05) return g.rate;
  return std::nullopt;
}

double pciLinkBw(int width, std::optional<int> laneRate) {
  int w = width > 0 ? width : 16;
  int r = laneRate ? *laneRate : 60;
  return w * r / 80.0;
}

double cpuInterconnectBw(std::string_view arch, std::string_view vendor, int familyId, int modelId) {
  if (arch == "ppc64") return 32.0;
  if (arch == "arm64" || arch == "aarch64") return 6.0;
  if (vendor == "AuthenticAMD" || vendor == "HygonGenuine") return 16.0;
  if (vendor == "CentaurHauls" || vendor == "  Shanghai  ") return 6.0;
  if (vendor == "GenuineIntel" && familyId == 6) {
    if (modelId >= 207) return 40.0;  // Emerald Rapids and later
    if (modelId >= 143) return 22.0;  // Sapphire Rapids
    if (modelId >= 85) return 10.0;   // Skylake and later server parts
    return 6.0;                       // Broadwell and earlier (QPI)
  }
  return 10.0;
}

double netBw(double speedMbps) { return (speedMbps > 0 ? speedMbps : kNetDefaultMbps) / 8000.0; }

double maxChannelBw(int sm) {
  if (sm >= 100) return 90.0;
  if (sm >= 90) return 60.0;
  return 40.0;
}

std::optional<std::string> normalizeBusId(std::string_view text) {
  // domain:bus:device.function, hex, domain optional.
  std::string s;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  auto parseHex = [](const std::string& p, unsigned long maxVal, unsigned long* out) {
    if (p.empty() || p.size() > 8) return false;
    for (char c : p)
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    *out = std::strtoul(p.c_str(), nullptr, 16);
    return *out <= maxVal;
  };
  size_t dot = s.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  std::string head = s.substr(0, dot), fn = s.substr(dot + 1);
  size_t c2 = head.rfind(':');
  if (c2 == std::string::npos) return std::nullopt;
  std::string dev = head.substr(c2 + 1);
  std::string rest = head.substr(0, c2);
  size_t c1 = rest.rfind(':');
  std::string bus = c1 == std::string::npos ? rest : rest.substr(c1 + 1);
  std::string dom = c1 == std::string::npos ? "0" : rest.substr(0, c1);
  unsigned long d, b, v, f;
  if (!parseHex(dom, 0xffffffffUL, &d) || !parseHex(bus, 0xff, &b) || !parseHex(dev, 0xff, &v) ||
      !parseHex(fn, 0x7, &f))
    return std::nullopt;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04lx:%02lx:%02lx.%lx", d, b, v, f);
  return std::string(buf);
}

}  // namespace braid::topo
