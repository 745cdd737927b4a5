// The environment settings that change what a graph schedules, renders or
// tunes to. They sit at the bottom of core, beside the errors and types,
// because realize, replay and the tuner all key their caches by them.
#pragma once
#include <string>

namespace tl {

// The settings that change what a graph schedules, renders or tunes to
// (TINYLENS_NOPOOLFUSION, _NOREUSE, _TUNE, _GEMM, _REDUCE, _CUDA_TILE), as
// text: part of the rendered-kernel and replay keys, so a setting changed
// while a process runs is never answered from a plan made under the old one.
std::string settings_key();

}  // namespace tl
