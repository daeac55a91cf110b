// The arrows between folders, checked: each folder's README.md says on a line starting with
// "May include:" which folders and files (backquoted paths from the repository root) its
// sources may include; this test reads every source file's quoted #include, finds what it
// names, and fails on any that the README does not allow. A folder always includes itself;
// angle-bracket includes (the standard library, POSIX, CUDA, gtest) are not checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = BRAID_SOURCE_DIR;
// The folders whose README states their arrows (DESIGN.md's layout).
const char* const kFolders[] = {"src/api", "src/core", "src/algo", "src/host", "src/fallback", "kernels", "transport", "topo"};

std::string readFile(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The backquoted paths of the README's "May include:" line (it may wrap onto the next lines
// until a blank line or a new list item).
std::vector<std::string> allowedBy(const fs::path& readme, std::string* error) {
  std::istringstream in(readFile(readme));
  std::string line, text;
  bool on = false;
  while (std::getline(in, line)) {
    std::string trimmed = std::regex_replace(line, std::regex("^[\\s\\-*]+"), "");
    if (!on && trimmed.rfind("May include:", 0) == 0) {
      on = true;
      text = trimmed;
      continue;
    }
    if (on) {
      if (trimmed.empty() || line.rfind("- ", 0) == 0 || line.rfind("#", 0) == 0) break;
      text += " " + trimmed;
    }
  }
  std::vector<std::string> out;
  if (!on) {
    *error = readme.string() + " has no line starting with \"May include:\"";
    return out;
  }
  std::regex quoted("`([^`]+)`");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), quoted); it != std::sregex_iterator(); ++it) {
    std::string p = (*it)[1];
    if (p.size() > 2 && p.compare(p.size() - 2, 2, "/*") == 0) p.resize(p.size() - 1);
    out.push_back(p);
  }
  return out;
}

// Where a quoted include resolves, as a path from the root, the way the build's include
// folders do (include/, src/, the root, generated headers as include/braid/).
std::string resolve(const std::string& name, const fs::path& from) {
  for (const fs::path& base : {kRoot / "include", kRoot / "src", kRoot, from.parent_path()})
    if (fs::exists(base / name)) return fs::relative(fs::canonical(base / name), kRoot).string();
  if (name.rfind("braid/", 0) == 0) return "include/" + name;  // generated (version.h)
  return "";
}

bool allowed(const std::string& target, const std::string& folder, const std::vector<std::string>& rules) {
  if (target.rfind(folder + "/", 0) == 0) return true;
  for (const std::string& r : rules)
    if (target == r || (r.back() == '/' && target.rfind(r, 0) == 0) || target.rfind(r + "/", 0) == 0) return true;
  return false;
}

TEST(Arrows, EveryIncludeIsOneItsFolderReadmeAllows) {
  std::regex include("^\\s*#\\s*include\\s+\"([^\"]+)\"");
  int folders = 0, files = 0, includes = 0;
  for (const char* folder : kFolders) {
    fs::path dir = kRoot / folder;
    if (!fs::exists(dir)) continue;  // not written yet
    ++folders;
    std::string error;
    std::vector<std::string> rules = allowedBy(dir / "README.md", &error);
    ASSERT_TRUE(error.empty()) << error;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cc" && ext != ".cu" && ext != ".cuh" && ext != ".in"))
        continue;
      ++files;
      std::istringstream in(readFile(entry.path()));
      std::string line;
      int lineNo = 0;
      while (std::getline(in, line)) {
        ++lineNo;
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        ++includes;
        std::string target = resolve(m[1], entry.path());
        EXPECT_FALSE(target.empty()) << fs::relative(entry.path(), kRoot).string() << ":" << lineNo << " includes \""
                                     << m[1] << "\", which is nowhere in the tree";
        if (!target.empty()) {
          EXPECT_TRUE(allowed(target, folder, rules))
              << fs::relative(entry.path(), kRoot).string() << ":" << lineNo << " includes " << target << ", which "
              << folder << "/README.md's \"May include:\" line does not allow";
        }
      }
    }
  }
  EXPECT_GE(folders, 7);
  EXPECT_GT(files, 50);
  std::printf("%d folders, %d files, %d quoted includes checked\n", folders, files, includes);
}

// The checker itself: a README without the line, and the prefix rules.
TEST(Arrows, RulesMatchPrefixesAndFiles) {
  std::vector<std::string> rules = {"src/core", "include/nccl.h", "transport/p2p_fifo.h", "include/braid/"};
  EXPECT_TRUE(allowed("src/core/log.h", "kernels", rules));
  EXPECT_TRUE(allowed("include/nccl.h", "kernels", rules));
  EXPECT_TRUE(allowed("include/braid/version.h", "kernels", rules));
  EXPECT_TRUE(allowed("kernels/pack.h", "kernels", rules));
  EXPECT_FALSE(allowed("transport/p2p.h", "kernels", rules));
  EXPECT_FALSE(allowed("src/core_extra/x.h", "kernels", rules));
  EXPECT_FALSE(allowed("src/api/task.h", "kernels", rules));
}

}  // namespace
