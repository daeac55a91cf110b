// src/fallback against real files: the search order over a folder tree made here, loading the
// toolkit's libnccl.so.2, and each refusal (braid, an NCCL before 2.28, a library that is not
// NCCL, a file that is not a library, a missing file); BRAID_BACKEND's parsing; and a source
// check that every exported function starts with BRAID_FORWARD.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fallback/backend.h"
#include "fallback/real_nccl.h"

namespace fs = std::filesystem;
using namespace braid::fallback;

namespace {

bool underSanitizer() {
  return dlsym(RTLD_DEFAULT, "__asan_init") != nullptr || dlsym(RTLD_DEFAULT, "__tsan_init") != nullptr;
}

struct TempTree {
  TempTree() {
    char pattern[] = "/tmp/braid-fallback-XXXXXX";
    root = mkdtemp(pattern);
  }
  ~TempTree() { fs::remove_all(root); }
  std::string file(const std::string& rel, const std::string& text = "") {
    fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  fs::path root;
};

TEST(Search, OrderAndOneEntryPerFile) {
  TempTree t;
  std::string ldPath = t.file("ld/libnccl.so.2");
  std::string confPath = t.file("conf/libnccl.so.2");
  std::string includedPath = t.file("included/libnccl.so");  // only the unversioned name here
  std::string cudaPath = t.file("cuda/lib64/libnccl.so.2");
  std::string venvPath = t.file("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
  fs::create_directories(t.root / "alias");
  fs::create_symlink(ldPath, t.root / "alias/libnccl.so.2");  // the same file again: listed once
  std::string conf = t.file("ld.so.conf", "# comment\n" + (t.root / "conf").string() + "\ninclude " +
                                               (t.root / "conf.d/*.conf").string() + "\n");
  t.file("conf.d/a.conf", (t.root / "included").string() + "  # trailing comment\n");
  std::map<std::string, std::string> env = {
      {"LD_LIBRARY_PATH", (t.root / "ld").string() + "::" + (t.root / "alias").string() + ":" + (t.root / "none").string()},
      {"CUDA_HOME", (t.root / "cuda").string()},
      {"VIRTUAL_ENV", (t.root / "venv").string()},
      {"HOME", (t.root / "home").string()}};
  auto lookup = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto paths = candidatePaths(lookup, conf);
  ASSERT_GE(paths.size(), 5u);
  EXPECT_EQ(paths[0], ldPath);
  EXPECT_EQ(paths[1], confPath);
  EXPECT_EQ(paths[2], includedPath);
  EXPECT_EQ(paths[3], cudaPath);
  // The system's folders come before the Python environments; the venv's copy is listed.
  EXPECT_NE(std::find(paths.begin(), paths.end(), venvPath), paths.end());
  EXPECT_EQ(std::count_if(paths.begin(), paths.end(), [&](const std::string& p) { return fs::equivalent(p, ldPath); }), 1);
}

TEST(Search, ForcedLibraryIsTheOnlyCandidate) {
  auto paths = candidatePaths([](const char* name) -> const char* {
    return std::string(name) == "BRAID_NCCL_LIBRARY" ? "/nonexistent/libnccl.so.2" : nullptr;
  });
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(paths[0], "/nonexistent/libnccl.so.2");
  RealNccl lib;
  EXPECT_NE(tryLoad(paths[0], &lib).find("cannot open it"), std::string::npos);
  EXPECT_EQ(lib.handle, nullptr);
}

TEST(Load, TheRealNccl) {
  if (std::string(REAL_NCCL_PATH).empty()) GTEST_SKIP() << "no libnccl.so.2 in the CUDA toolkit";
  RealNccl lib;
  std::string why = tryLoad(REAL_NCCL_PATH, &lib);
  if (underSanitizer()) {
    EXPECT_NE(why.find("RTLD_DEEPBIND"), std::string::npos) << why;
    return;
  }
  ASSERT_EQ(why, "");
  EXPECT_GE(lib.version, 22800);
  EXPECT_NE(lib.symbol("pncclAllReduce"), nullptr);
  EXPECT_EQ(lib.symbol("braidVersion"), nullptr);
}

TEST(Load, Refusals) {
  if (underSanitizer()) GTEST_SKIP() << "nothing is dlopened under a sanitizer (RTLD_DEEPBIND)";
  TempTree t;
  RealNccl lib;
  EXPECT_NE(tryLoad(BRAID_LIBRARY_PATH, &lib).find("copy of braid (it exports braidVersion)"), std::string::npos);
  std::string old = tryLoad(OLD_NCCL_PATH, &lib);
  EXPECT_NE(old.find("NCCL 2.27.3, older than 2.28"), std::string::npos) << old;
  Dl_info info{};
  ASSERT_NE(dladdr(dlsym(RTLD_DEFAULT, "dlopen"), &info), 0);  // libc (or libdl): not NCCL
  EXPECT_NE(tryLoad(info.dli_fname, &lib).find("no pncclGetVersion"), std::string::npos) << info.dli_fname;
  EXPECT_NE(tryLoad(t.file("libnccl.so.2", "not an ELF file"), &lib).find("dlopen failed: "), std::string::npos);
  EXPECT_EQ(lib.handle, nullptr);
}

TEST(Backend, Parse) {
  EXPECT_EQ(parseBackend(nullptr), Backend::Auto);
  EXPECT_EQ(parseBackend(""), Backend::Auto);
  EXPECT_EQ(parseBackend("AUTO"), Backend::Auto);
  EXPECT_EQ(parseBackend("braid"), Backend::Braid);
  EXPECT_EQ(parseBackend("Nccl"), Backend::Nccl);
  EXPECT_EQ(parseBackend("nccl2"), Backend::Invalid);
  EXPECT_EQ(parseBackend(" nccl"), Backend::Invalid);
}

// The text of every src/api/*.cc, with its file name.
std::vector<std::pair<std::string, std::string>> apiSources() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : fs::directory_iterator(fs::path(BRAID_SOURCE_DIR) / "src/api")) {
    if (entry.path().extension() != ".cc") continue;
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    out.emplace_back(entry.path().filename().string(), ss.str());
  }
  return out;
}

// Every BRAID_API function's first statement is BRAID_FORWARD(its own name, ...): a missing
// one would let BRAID_BACKEND=nccl hand a real NCCL handle to braid's code.
TEST(Exports, EveryOneForwards) {
  const std::regex api(R"(BRAID_API\(\s*[^,]+,\s*(\w+)[^{]*\{\s*(\w+)\((\w+))");
  int checked = 0;
  for (const auto& [file, text] : apiSources()) {
    for (std::sregex_iterator it(text.begin(), text.end(), api), end; it != end; ++it) {
      ++checked;
      EXPECT_EQ((*it)[2].str() + "(" + (*it)[3].str(), "BRAID_FORWARD(" + (*it)[1].str())
          << file << ": " << (*it)[1];
    }
  }
  EXPECT_EQ(checked, 52);  // libnccl.so.2 2.28.9's API functions
}

// Every BRAID_API function that takes a communicator sends it to the real NCCL when the real
// NCCL serves it (api/real_served.h): its statement after BRAID_FORWARD is BRAID_REAL_SERVES*
// of its own name, a realServing(comm) branch (split, shrink, finalize, abort), or the calls
// braid lacks, BRAID_FALLBACK_COMM (the same real communicator); destroy closes the real one in
// closeComm. A function added without it would run braid's engine on a communicator it cannot
// connect.
TEST(Exports, EveryOneWithACommunicatorRoutesARealServedOne) {
  const std::regex api(R"(BRAID_API\(\s*[^,]+,\s*(\w+),([^{]*)\{\s*BRAID_FORWARD\([^;]*;\s*([^\n]*))");
  const std::regex takesComm(R"(ncclComm_t\s+comm\b)");
  int checked = 0;
  for (const auto& [file, text] : apiSources()) {
    for (std::sregex_iterator it(text.begin(), text.end(), api), end; it != end; ++it) {
      const std::string name = (*it)[1].str(), params = (*it)[2].str(), next = (*it)[3].str();
      if (!std::regex_search(params, takesComm) || name == "ncclCommDestroy") continue;
      ++checked;
      const bool routes = next.rfind("BRAID_REAL_SERVES(" + name + ",", 0) == 0 ||
                          next.rfind("BRAID_REAL_SERVES_NOW(" + name + ",", 0) == 0 ||
                          next.rfind("BRAID_FALLBACK_COMM(" + name + ",", 0) == 0 ||
                          next.find("realServing(comm)") != std::string::npos;
      EXPECT_TRUE(routes) << file << ": " << name << " goes on with: " << next;
    }
  }
  EXPECT_EQ(checked, 35);  // the functions of libnccl.so.2 2.28.9 that take a communicator, less destroy
}

}  // namespace
