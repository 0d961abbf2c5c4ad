// libFuzzer target: a cache entry's manifest text -> Manifest::from_json, and a parsed manifest
// back through to_json and from_json unchanged. Any input must end in a manifest or one
// moejit::Error.
#include <moejit/error.hpp>

#include "cache/manifest.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto manifest = moejit::detail::Manifest::from_json(text);
    const std::string json = manifest.to_json();
    if (moejit::detail::Manifest::from_json(json).to_json() != json) std::abort();
  } catch (const moejit::Error&) {
  }
  return 0;
}
