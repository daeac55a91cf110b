#include "host_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>

namespace braid::doctor {

std::optional<std::string> readFile(const std::string& path, size_t limit) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  std::string out;
  char buf[4096];
  bool failed = false;
  while (out.size() < limit) {
    size_t n = std::fread(buf, 1, std::min(sizeof buf, limit - out.size()), f);
    out.append(buf, n);
    if (n == 0) {
      failed = std::ferror(f) != 0;  // sysfs attributes that cannot be read fail here (EINVAL)
      break;
    }
  }
  std::fclose(f);
  if (failed) return std::nullopt;
  return out;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::optional<std::string> readLine(const std::string& path) {
  auto text = readFile(path, 64 * 1024);
  if (!text) return std::nullopt;
  return trim(text->substr(0, text->find('\n')));
}

std::vector<std::string> listDir(const std::string& path, size_t limit) {
  std::vector<std::string> names;
  DIR* d = opendir(path.c_str());
  if (!d) return names;
  while (names.size() < limit) {
    dirent* e = readdir(d);
    if (!e) break;
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string realPath(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return {};
  return buf;
}

bool isPciAddress(const std::string& n) {
  // dddd:bb:dd.f in hex
  if (n.size() != 12 || n[4] != ':' || n[7] != ':' || n[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11})
    if (!std::isxdigit(static_cast<unsigned char>(n[i]))) return false;
  return true;
}

std::string pciAddressOf(const std::string& deviceLink) {
  std::string real = realPath(deviceLink);
  if (real.empty()) return {};
  std::string base = real.substr(real.rfind('/') + 1);
  return isPciAddress(base) ? base : std::string();
}

std::vector<std::string> upstreamBridges(const std::string& pciAddress, const std::string& sysRoot) {
  std::vector<std::string> up;
  std::string real = realPath(sysRoot + "/bus/pci/devices/" + pciAddress);
  if (real.empty()) return up;
  // /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0: components before the device.
  std::vector<std::string> parts;
  size_t start = 0;
  while (start < real.size()) {
    size_t slash = real.find('/', start);
    if (slash == std::string::npos) slash = real.size();
    if (slash > start) parts.push_back(real.substr(start, slash - start));
    start = slash + 1;
  }
  for (size_t i = parts.size(); i-- > 0;) {
    if (parts[i] == pciAddress) continue;
    if (isPciAddress(parts[i])) up.push_back(parts[i]);
  }
  return up;
}

std::vector<int> processesNamed(const std::string& comm) {
  std::vector<int> pids;
  for (const std::string& e : listDir("/proc", 1 << 16)) {
    if (e.empty() || !std::isdigit(static_cast<unsigned char>(e[0]))) continue;
    auto c = readLine("/proc/" + e + "/comm");
    if (c && *c == comm) pids.push_back(std::atoi(e.c_str()));
  }
  return pids;
}

}  // namespace braid::doctor
