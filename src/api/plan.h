// What both engines do to turn a task into a schedule: the CollArgs (the same on every rank
// of the collective) and the algorithm's plan.
#pragma once
#include <cstddef>

#include "algo/schedule.h"
#include "api/task.h"

namespace braid::api {

// P2P lanes use channels from here on, so they never share a connection with collective lanes.
constexpr int kP2pChannelBase = 64;

// Bytes of the whole collective as every rank sees it (a root's buffer size would differ).
size_t collectiveBytes(const Task& t);

// `fifoBytes` is a connection's capacity: a step may fill at most half of it, so that every
// ring neighbour can post its step before it must consume (otherwise all ranks block sending).
algo::CollArgs collArgsFor(const Task& t, int nChannels, size_t alignBytes, size_t fifoBytes);

// The tuner's choice (the default algorithm today), built and dumped when asked for.
algo::RankPlan planFor(const algo::CollArgs& args);

}  // namespace braid::api
