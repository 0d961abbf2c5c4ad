// libFuzzer target: .npy bytes -> parse_npy, and a parsed array back through format_npy and
// parse_npy unchanged. Any input must end in an array or one moejit::Error.
#include <moejit/error.hpp>

#include "tools/npy.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const moejit::tools::NpyArray array = moejit::tools::parse_npy(bytes, "fuzz.npy", "x");
    const moejit::tools::NpyArray again = moejit::tools::parse_npy(moejit::tools::format_npy(array), "fuzz.npy", "x");
    if (again.type != array.type || again.shape != array.shape || again.data != array.data) std::abort();
  } catch (const moejit::Error&) {
  }
  return 0;
}
