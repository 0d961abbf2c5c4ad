#pragma once
// The yardstick contract (templates/yardstick.cuh): the SM copy and streaming-read kernels whose
// bandwidth `moejit bench` reports every op against. Not an op of any spec: bench compiles it
// when it first needs it, into the same cache as the ops (a self-test of the pipeline).

#include <moejit/contract.hpp>

#include <string_view>

namespace moejit::detail {

inline constexpr int kYardstickThreads = 256;
inline constexpr int kYardstickUnroll = 8;
/// The fold no input of the read kernel produces: bench fills its source with a byte pattern
/// whose fold is zero.
inline constexpr unsigned kYardstickNeverFolded = 0x9E3779B9u;
inline constexpr std::string_view kYardstickCopy = "copy";
inline constexpr std::string_view kYardstickRead = "read";

Contract yardstick_contract(std::string_view arch);

}  // namespace moejit::detail
