// The channel rule of device-memory calls (src/api/channels.h).
#include <gtest/gtest.h>

#include "api/channels.h"

namespace braid::api {
namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

TEST(Channels, OneRankPerGpuSplitsSmallCallsFinely) {
  EXPECT_EQ(channelsWanted(0, kFineBytesPerChannel), 1u);
  EXPECT_EQ(channelsWanted(8, kFineBytesPerChannel), 1u);
  EXPECT_EQ(channelsWanted(64 * KiB, kFineBytesPerChannel), 1u);
  EXPECT_EQ(channelsWanted(64 * KiB + 1, kFineBytesPerChannel), 2u);
  EXPECT_EQ(channelsWanted(512 * KiB, kFineBytesPerChannel), 8u);
  // At most 16 until a channel per 512 KiB gives more.
  EXPECT_EQ(channelsWanted(1 * MiB, kFineBytesPerChannel), 16u);
  EXPECT_EQ(channelsWanted(8 * MiB, kFineBytesPerChannel), 16u);
  EXPECT_EQ(channelsWanted(16 * MiB, kFineBytesPerChannel), 32u);
  EXPECT_EQ(channelsWanted(32 * MiB, kFineBytesPerChannel), 64u);
}

TEST(Channels, RanksSharingAGpuKeepAChannelPer512KiB) {
  for (size_t bytes : {size_t(1), 512 * KiB, 512 * KiB + 1, 3 * MiB, 8 * MiB, 100 * MiB})
    EXPECT_EQ(channelsWanted(bytes, kCoarseBytesPerChannel), std::max<size_t>(1, (bytes + 512 * KiB - 1) / (512 * KiB)))
        << bytes;
}

TEST(Channels, NeverFewerForMoreBytes) {
  size_t last = 0;
  for (size_t bytes = 0; bytes <= 64 * MiB; bytes += 4 * KiB + 3) {
    size_t c = channelsWanted(bytes, kFineBytesPerChannel);
    EXPECT_GE(c, last) << bytes;
    last = c;
  }
}

}  // namespace
}  // namespace braid::api
