#pragma once
// The manifest stored next to each cubin: the key and everything it hashes, the cubin's size and
// checksum, the kernels' lowered names and ptxas resource report. It makes an entry explain
// itself (`moejit cache ls`, `explain`) and lets a reader recompute and check the key.

#include "compiler/key.hpp"
#include "compiler/nvrtc.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moejit::detail {

struct Manifest {
  Key key;
  KeyInputs inputs;
  std::uint64_t cubin_bytes = 0;
  std::string cubin_checksum;  ///< XXH3-128, hex
  std::vector<CompiledKernel> kernels;
  double compile_seconds = 0;
  std::string created;         ///< UTC time of compilation; informational, never in a key

  /// The manifest's JSON, with a checksum of its own over every other field.
  std::string to_json() const;
  /// Parses a manifest; throws moejit::Error (cache) when malformed or its checksum fails.
  static Manifest from_json(std::string_view text);
};

std::string checksum(std::string_view data);
std::string utc_now();

}  // namespace moejit::detail
