// What the multi-process test drivers share: start N ranks of a rank program through the
// launcher with a fresh unique id, check that every rank ended well and said OK, and list
// braid's names in /dev/shm.
#pragma once
#include <dirent.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nccl.h"
#include "tests/common/rank_env.h"
#include "tests/launcher/launcher.h"

namespace braid::mptest {

inline std::vector<test::RankResult> launchRanks(const char* program, int n, const std::vector<std::string>& args,
                                                 double timeout, std::vector<std::pair<std::string, std::string>> env) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  test::LaunchSpec spec;
  spec.nRanks = n;
  spec.argv = {program};
  for (const auto& a : args) spec.argv.push_back(a);
  spec.env = std::move(env);
  spec.uniqueIdHex = test::uniqueIdToHex(id);
  spec.timeoutSeconds = timeout;
  return test::runRanks(spec);
}

inline void expectAllOk(const std::vector<test::RankResult>& results) {
  for (const auto& r : results) {
    EXPECT_TRUE(test::succeeded(r)) << "rank " << r.rank << " " << test::describeEnd(r) << "\n" << r.output;
    EXPECT_NE(r.output.find("OK"), std::string::npos) << "rank " << r.rank << ":\n" << r.output;
  }
}

// The names braid made in /dev/shm (segments left by a crashed rank would stay there).
inline std::set<std::string> braidShmNames() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::strncmp(e->d_name, "braid-", 6) == 0) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

}  // namespace braid::mptest
