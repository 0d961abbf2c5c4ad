#pragma once
// Cache keys: a 128-bit hash of the canonical contract text, the template closure hash, the
// arch, the NVRTC version, the normalized compile options and the cache schema version.

#include <moejit/contract.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moejit::detail {

/// Bump when the on-disk layout or the manifest changes meaning.
inline constexpr int kCacheSchemaVersion = 3;  // 2: the manifest carries its own checksum; 3: over its bytes

struct Key {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;

  std::string hex() const;
  static std::optional<Key> from_hex(std::string_view text) noexcept;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  std::size_t operator()(const Key& k) const noexcept { return static_cast<std::size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ull)); }
};

/// The toolchain identity that enters every key.
struct Toolchain {
  std::string nvrtc_version;         ///< "13.0"
  std::vector<std::string> options;  ///< compile options without include paths or arch
};

/// Everything a key hashes, in the order it hashes them (also stored in the manifest so that a
/// key can be recomputed from an entry and checked).
struct KeyInputs {
  std::string contract_text;
  std::string template_hash;
  std::string arch;
  std::string nvrtc_version;
  std::vector<std::string> options;
  int schema_version = kCacheSchemaVersion;
};

KeyInputs key_inputs(const Contract& contract, const Toolchain& toolchain);
Key make_key(const KeyInputs& inputs);

}  // namespace moejit::detail
