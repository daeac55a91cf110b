// Small readers of /sys and /proc for the inventory: every read may fail (a container hides
// parts of /sys), so each answers "absent" instead of failing.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace braid::doctor {

// The whole file (up to `limit` bytes), or nullopt when it cannot be opened or read.
std::optional<std::string> readFile(const std::string& path, size_t limit = 1 << 20);
// The first line without its newline and surrounding blanks; nullopt when unreadable.
std::optional<std::string> readLine(const std::string& path);
// Entry names of a directory, sorted, without "." and ".."; empty when it cannot be listed.
std::vector<std::string> listDir(const std::string& path, size_t limit = 4096);
bool exists(const std::string& path);
// realpath(3), or empty when the path does not resolve.
std::string realPath(const std::string& path);
// "0000:18:00.0": a PCI address as sysfs spells it.
bool isPciAddress(const std::string& name);
// The PCI address of a sysfs device link (/sys/class/net/eth0/device -> .../0000:18:00.0), or
// empty when the device is not a PCI function.
std::string pciAddressOf(const std::string& deviceLink);
// The bridges above a PCI function, nearest first (sysfs path components that are addresses).
std::vector<std::string> upstreamBridges(const std::string& pciAddress, const std::string& sysRoot = "/sys");
std::string trim(const std::string& s);
// Every process whose /proc/<pid>/comm equals `comm` (bounded scan of /proc).
std::vector<int> processesNamed(const std::string& comm);

}  // namespace braid::doctor
