// The colours of the plots: series colours in order (distinct on white and for the common
// kinds of colour blindness), and the frame's. Internal to tools/plot and its test.
#pragma once
#include <cstddef>

#include "tools/plot/canvas.h"

namespace braid::plot::palette {

inline constexpr Rgb kSeries[] = {
    {31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},  {148, 103, 189},
    {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207},
};
inline constexpr size_t kSeriesCount = sizeof(kSeries) / sizeof(kSeries[0]);

// The colour of the index-th series of a panel; colours repeat after kSeriesCount series.
inline Rgb series(size_t index) { return kSeries[index % kSeriesCount]; }

inline constexpr Rgb kBackground = {255, 255, 255};
inline constexpr Rgb kInk = {0, 0, 0};          // axes, text
inline constexpr Rgb kGrid = {224, 224, 224};   // grid lines at the ticks
inline constexpr Rgb kFaint = {110, 110, 110};  // "no data"

}  // namespace braid::plot::palette
