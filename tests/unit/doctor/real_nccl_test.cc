// The real-NCCL finder on this machine's files: it finds NVIDIA's libnccl.so.2 (the CUDA
// toolkit's or Debian's) and refuses braid's own library, by its name and by its contents.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "real_nccl.h"

namespace braid {
namespace {

// Where NVIDIA's library is on the build machines (ldconfig -p | grep nccl).
std::string installedRealNccl() {
  for (const char* p : {"/usr/local/cuda/lib64/libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2"})
    if (::access(p, R_OK) == 0) return p;
  return {};
}

TEST(RealNccl, FindsNvidiasLibrary) {
  if (installedRealNccl().empty()) GTEST_SKIP() << "no libnccl.so.2 in /usr/local/cuda/lib64 or /usr/lib/x86_64-linux-gnu";
  RealNcclSearchOptions o;  // standard places only
  RealNcclSearch s = findRealNccl(o);
  ASSERT_FALSE(s.path.empty()) << "tried " << s.tried.size();
  EXPECT_GE(s.version, 22800) << ncclVersionString(s.version);
  EXPECT_EQ(ncclVersionString(22809), "2.28.9");
  EXPECT_EQ(ncclVersionString(2708), "2.7.8");
  std::string why;
  EXPECT_FALSE(isBraidLibrary(s.path, &why)) << why;
}

TEST(RealNccl, RefusesBraidsOwnLibraryFirstOnTheLoaderPath) {
  if (installedRealNccl().empty()) GTEST_SKIP() << "no real libnccl.so.2 installed";
  RealNcclSearchOptions o;
  o.ldLibraryPath = BRAID_BUILD_DIR;  // holds libnccl.so.2 -> libbraid.so
  RealNcclSearch s = findRealNccl(o);
  ASSERT_GE(s.tried.size(), 2u);
  EXPECT_EQ(s.tried[0].path, std::string(BRAID_BUILD_DIR) + "/libnccl.so.2");
  EXPECT_FALSE(s.tried[0].accepted);
  EXPECT_NE(s.tried[0].why.find("braid's own library"), std::string::npos) << s.tried[0].why;
  EXPECT_FALSE(s.path.empty());
  EXPECT_NE(s.path.rfind(BRAID_BUILD_DIR, 0), 0u) << "accepted braid's: " << s.path;
}

TEST(RealNccl, RecognisesBraidByContentsUnderAnotherName) {
  char dir[] = "/tmp/braid-real-nccl-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string copy = std::string(dir) + "/libnccl.so.2";
  {
    std::ifstream in(std::string(BRAID_BUILD_DIR) + "/libbraid.so", std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  RealNcclSearchOptions o;
  o.explicitPath = copy;
  RealNcclSearch s = findRealNccl(o);
  ::unlink(copy.c_str());
  ::rmdir(dir);
  EXPECT_TRUE(s.path.empty());
  ASSERT_EQ(s.tried.size(), 1u);
  EXPECT_NE(s.tried[0].why.find(".rodata holds"), std::string::npos) << s.tried[0].why;
}

TEST(RealNccl, AnExplicitPathIsTheOnlyOneTried) {
  RealNcclSearchOptions o;
  o.explicitPath = "/nonexistent";
  RealNcclSearch s = findRealNccl(o);
  EXPECT_TRUE(s.path.empty());
  EXPECT_TRUE(s.explicitPath);
  ASSERT_EQ(s.tried.size(), 1u);
  EXPECT_EQ(s.tried[0].why, "cannot open: No such file or directory");
}

TEST(RealNccl, RefusesFilesThatAreNotNccl) {
  char dir[] = "/tmp/braid-real-nccl-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string text = std::string(dir) + "/libnccl.so";
  { std::ofstream(text) << "INPUT(libnccl.so.2)\n"; }  // a linker script, as -dev packages ship
  RealNcclSearchOptions o;
  o.standardDirs = false;
  o.extraDirs = {dir};
  RealNcclSearch s = findRealNccl(o);
  ::unlink(text.c_str());
  ::rmdir(dir);
  EXPECT_TRUE(s.path.empty());
  ASSERT_EQ(s.tried.size(), 1u);
  EXPECT_EQ(s.tried[0].why, "not a 64-bit ELF shared object");
}

}  // namespace
}  // namespace braid
