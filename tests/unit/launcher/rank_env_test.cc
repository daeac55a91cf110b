// tests/common/rank_env.h: the hex coding of the unique id and the parsing of the variables.
#include "tests/common/rank_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace braid::test {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* rank, const char* nRanks, const char* id) {
    set(kRankVar, rank);
    set(kNRanksVar, nRanks);
    set(kUniqueIdVar, id);
  }
  ~ScopedEnv() {
    unsetenv(kRankVar);
    unsetenv(kNRanksVar);
    unsetenv(kUniqueIdVar);
  }

 private:
  static void set(const char* name, const char* value) {
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
};

TEST(RankEnv, HexRoundTripsEveryByte) {
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof id.internal; ++i) id.internal[i] = static_cast<char>(i * 7 + 3);
  std::string hex = uniqueIdToHex(id);
  ASSERT_EQ(hex.size(), 256u);
  EXPECT_EQ(hex.substr(0, 6), "030a11");
  ncclUniqueId back;
  ASSERT_TRUE(decodeHex(hex, back.internal, sizeof back.internal));
  EXPECT_EQ(std::string(id.internal, 128), std::string(back.internal, 128));
}

TEST(RankEnv, DecodeRejectsWrongLengthAndNonHex) {
  char out[2];
  EXPECT_TRUE(decodeHex("0aFf", out, 2));
  EXPECT_EQ(static_cast<unsigned char>(out[1]), 0xff);
  EXPECT_FALSE(decodeHex("0aF", out, 2));
  EXPECT_FALSE(decodeHex("0aFf00", out, 2));
  EXPECT_FALSE(decodeHex("0g00", out, 2));
}

TEST(RankEnv, ReadsAllThreeVariables) {
  std::string hex(256, '0');
  hex[255] = '7';
  ScopedEnv scoped("2", "4", hex.c_str());
  RankEnv env;
  std::string error;
  ASSERT_TRUE(readRankEnv(&env, &error)) << error;
  EXPECT_TRUE(env.launched);
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.nRanks, 4);
  ASSERT_TRUE(env.hasUniqueId);
  EXPECT_EQ(env.uniqueId.internal[127], 7);
}

TEST(RankEnv, AbsentVariablesMeanNotLaunched) {
  ScopedEnv scoped(nullptr, nullptr, nullptr);
  RankEnv env;
  std::string error;
  EXPECT_TRUE(readRankEnv(&env, &error));
  EXPECT_FALSE(env.launched);
}

TEST(RankEnv, RejectsMalformedValues) {
  RankEnv env;
  std::string error;
  {
    ScopedEnv scoped("4", "4", nullptr);  // rank out of range
    EXPECT_FALSE(readRankEnv(&env, &error));
    EXPECT_NE(error.find("BRAID_LAUNCH_RANK"), std::string::npos);
  }
  {
    ScopedEnv scoped("0", "x", nullptr);
    EXPECT_FALSE(readRankEnv(&env, &error));
  }
  {
    ScopedEnv scoped("0", "2", "abc");  // id too short
    EXPECT_FALSE(readRankEnv(&env, &error));
    EXPECT_NE(error.find("BRAID_UNIQUE_ID"), std::string::npos);
  }
  {
    ScopedEnv scoped(nullptr, nullptr, std::string(256, '0').c_str());  // id without a rank
    EXPECT_FALSE(readRankEnv(&env, &error));
  }
}

}  // namespace
}  // namespace braid::test
