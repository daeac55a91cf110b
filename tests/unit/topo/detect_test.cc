// Live detection against a fake /sys tree (the shape of a real one: NUMA nodes, a PCIe switch
// with a GPU and an InfiniBand NIC, a second GPU on another socket), against an empty one, and
// on this machine.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "topo/detect.h"
#include "topo/paths.h"
#include "topo/system.h"

namespace braid::topo {
namespace {

class FakeSysfs {
 public:
  FakeSysfs() {
    char tmpl[] = "/tmp/braid-fake-sysfs-XXXXXX";
    char* dir = ::mkdtemp(tmpl);
    EXPECT_NE(dir, nullptr);
    root_ = dir ? dir : "/tmp";
  }
  ~FakeSysfs() {
    std::string cmd = "rm -rf '" + root_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  const std::string& root() const { return root_; }

  void file(const std::string& rel, const std::string& content) {
    mkdirs(rel.substr(0, rel.rfind('/')));
    std::ofstream(root_ + "/" + rel) << content << "\n";
  }
  void link(const std::string& rel, const std::string& target) {
    mkdirs(rel.substr(0, rel.rfind('/')));
    ASSERT_EQ(::symlink(target.c_str(), (root_ + "/" + rel).c_str()), 0) << rel;
  }
  // A PCI function at `path` (relative to devices/) with its attribute files and bus/pci link.
  void pci(const std::string& path, const std::string& cls, const std::string& vendor, int numa,
           const std::string& speed = "32.0 GT/s PCIe", int width = 16) {
    std::string dir = "devices/" + path;
    file(dir + "/class", cls);
    file(dir + "/vendor", vendor);
    file(dir + "/device", "0x2335");
    file(dir + "/numa_node", std::to_string(numa));
    file(dir + "/max_link_speed", speed);
    file(dir + "/max_link_width", std::to_string(width));
    std::string bus = path.substr(path.rfind('/') + 1);
    link("bus/pci/devices/" + bus, "../../../" + dir);
  }

 private:
  void mkdirs(const std::string& rel) {
    std::string cur = root_;
    size_t pos = 0;
    while (pos <= rel.size()) {
      size_t slash = rel.find('/', pos);
      cur += "/" + rel.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      ::mkdir(cur.c_str(), 0755);
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
  }
  std::string root_;
};

TEST(TopoDetect, FakeSysfsBuildsTheRightGraph) {
  FakeSysfs fs;
  fs.file("devices/system/node/node0/cpumap", "00000000,0000ffff");
  fs.file("devices/system/node/node1/cpumap", "00000000,ffff0000");
  fs.file("devices/system/node/node2/cpumap", "00000000,00000000");  // memory only: no CPU node
  // Socket 1: root port 80:01.0, switch 81:00.0 with downstream ports 82:00.0 and 82:01.0.
  const std::string sw = "pci0000:80/0000:80:01.0/0000:81:00.0";
  fs.pci("pci0000:80/0000:80:01.0", "0x060400", "0x8086", 1);
  fs.pci(sw, "0x060400", "0x1000", 1);
  fs.pci(sw + "/0000:82:00.0", "0x060400", "0x1000", 1);
  fs.pci(sw + "/0000:82:01.0", "0x060400", "0x1000", 1);
  fs.pci(sw + "/0000:82:00.0/0000:83:00.0", "0x030200", "0x10de", 1);
  fs.pci(sw + "/0000:82:01.0/0000:84:00.0", "0x020700", "0x15b3", 1);
  // Socket 0: a GPU straight under a root port; CUDA does not show it (CUDA_VISIBLE_DEVICES).
  fs.pci("pci0000:00/0000:00:02.0", "0x060400", "0x8086", 0);
  fs.pci("pci0000:00/0000:00:02.0/0000:03:00.0", "0x030200", "0x10de", 0);
  // An NVIDIA device that is not a GPU (an NVSwitch) must not become one.
  fs.pci("pci0000:00/0000:00:03.0", "0x068000", "0x10de", 0);
  fs.link("class/infiniband/mlx5_0/device", "../../../devices/" + sw + "/0000:82:01.0/0000:84:00.0");
  fs.file("class/infiniband/mlx5_0/node_guid", "b83f:d203:00a1:b2c3");
  fs.file("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
  fs.file("class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)");
  fs.file("class/infiniband/mlx5_0/ports/2/state", "1: DOWN");
  fs.file("module/nvidia_peermem/version", "1.0");

  DetectOptions opt;
  opt.sysfsRoot = fs.root();
  opt.useCuda = false;
  opt.useNvml = false;
  opt.injectedGpus = {{"0000:83:00.0", 0, 90}};
  DetectReport report;
  XmlElement xml = detectTopologyXml(opt, &report);
  System sys;
  std::string error;
  ASSERT_TRUE(buildSystem(xml, "fake", &sys, &error)) << error << "\n" << writeXml(xml);
  EXPECT_TRUE(report.sysfsNuma);
  EXPECT_EQ(report.pciPathsResolved, 3);  // two GPUs and the NIC

  ASSERT_EQ(sys.cpus.size(), 2u) << writeXml(xml);
  EXPECT_EQ(sys.node(sys.cpus[0]).affinity, "00000000,0000ffff");
  ASSERT_EQ(sys.gpus.size(), 2u) << writeXml(xml);
  int g83 = sys.findBusId("0000:83:00.0"), g03 = sys.findBusId("0000:03:00.0");
  ASSERT_GE(g83, 0);
  ASSERT_GE(g03, 0);
  EXPECT_EQ(sys.node(g83).dev, 0);
  EXPECT_EQ(sys.node(g03).dev, 1);   // numbered after the CUDA-visible one
  EXPECT_EQ(sys.node(g03).sm, 90);   // same PCI device id as the visible GPU
  // NCCL's layout: the GPU hangs off the switch's upstream port; the root port is folded away.
  EXPECT_EQ(sys.node(sys.node(g83).parent).busId, "0000:81:00.0");
  EXPECT_EQ(sys.node(sys.node(sys.node(g83).parent).parent).type, NodeType::Cpu);
  EXPECT_EQ(sys.node(sys.node(g83).cpu).numaId, 1);
  EXPECT_EQ(sys.node(sys.node(g03).cpu).numaId, 0);
  ASSERT_EQ(sys.nets.size(), 1u);  // the DOWN port is skipped
  const Node& net = sys.node(sys.nets[0]);
  EXPECT_EQ(net.name, "mlx5_0");
  EXPECT_DOUBLE_EQ(net.speedMbps, 400000);
  EXPECT_TRUE(net.gdr);
  EXPECT_EQ(net.guid, 0xb83fd20300a1b2c3ull);
  EXPECT_EQ(deviceToNicPath(sys, g83, sys.nics[0]).type, PathType::Pix);
  EXPECT_EQ(deviceToNicPath(sys, g03, sys.nics[0]).type, PathType::Sys);
  EXPECT_EQ(gpuPath(sys, g83, g03).type, PathType::Sys);
  EXPECT_NEAR(sys.node(g83).upBw, 48.0, 1e-9);
  // The dump of a detection reads back as the same graph.
  XmlElement again;
  ASSERT_TRUE(parseXml(writeXml(sys.xml), "again", &again, &error)) << error;
  System back;
  ASSERT_TRUE(buildSystem(again, "again", &back, &error)) << error;
  EXPECT_EQ(describeSystem(back), describeSystem(sys));
}

TEST(TopoDetect, SocketNicsWhenThereIsNoRdma) {
  FakeSysfs fs;
  fs.pci("pci0000:00/0000:00:03.0", "0x020000", "0x1af4", -1);
  fs.link("class/net/eth0/device", "../../../devices/pci0000:00/0000:00:03.0");
  fs.file("class/net/eth0/speed", "-1");
  fs.file("class/net/lo/mtu", "65536");  // lo and virtual interfaces have no device link
  fs.file("class/net/docker0/mtu", "1500");
  DetectOptions opt;
  opt.sysfsRoot = fs.root();
  opt.useCuda = false;
  opt.useNvml = false;
  DetectReport report;
  System sys;
  std::string error;
  ASSERT_TRUE(buildSystem(detectTopologyXml(opt, &report), "fake", &sys, &error)) << error;
  ASSERT_EQ(sys.nets.size(), 1u);
  EXPECT_EQ(sys.node(sys.nets[0]).name, "eth0");
  EXPECT_DOUBLE_EQ(sys.node(sys.nets[0]).speedMbps, 10000);  // unknown speed: NCCL's 10 Gb/s
  EXPECT_FALSE(report.sysfsNuma);
  EXPECT_EQ(sys.node(sys.cpus[0]).numaId, -1);
}

TEST(TopoDetect, MissingSysfsNeverFails) {
  DetectOptions opt;
  opt.sysfsRoot = "/nonexistent/sys";
  opt.procRoot = "/nonexistent/proc";
  opt.useCuda = false;
  opt.injectedGpus = {{"0000:18:00.0", 0, 80}};
  DetectReport report;
  System sys;
  std::string error;
  ASSERT_TRUE(buildSystem(detectTopologyXml(opt, &report), "empty", &sys, &error)) << error;
  ASSERT_EQ(sys.gpus.size(), 1u);
  EXPECT_EQ(sys.node(sys.node(sys.gpus[0]).parent).type, NodeType::Cpu);
  EXPECT_FALSE(report.notes.empty());
}

TEST(TopoDetect, ThisMachine) {
  // CI has no GPU and no driver: zero GPUs, and no crash. On a GPU machine: every CUDA GPU.
  DetectReport report;
  XmlElement xml = detectTopologyXml(DetectOptions{}, &report);
  System sys;
  std::string error;
  ASSERT_TRUE(buildSystem(xml, "live", &sys, &error)) << error << "\n" << writeXml(xml);
  EXPECT_FALSE(sys.cpus.empty());
  if (report.cudaGpus > 0) {
    EXPECT_GE(sys.gpus.size(), static_cast<size_t>(report.cudaGpus));
  }
  bool ok = false;
  std::string why;
  auto gpus = cudaGpus(&ok, &why);
  if (!ok) {
    EXPECT_FALSE(why.empty());
  }
}

}  // namespace
}  // namespace braid::topo
