#pragma once
// SASS from a cubin, by the CUDA toolkit's own disassembler (nvdisasm): what `moejit compile
// --emit sass` prints. NVRTC gives no SASS text, so this is the one place moejit runs a program.

#include <filesystem>
#include <string>
#include <string_view>

namespace moejit::detail {

/// $CUDA_HOME/bin/nvdisasm where it is an executable file; else throws moejit::Error (io: the
/// toolkit lacks it, a tool a trimmed toolkit may leave out) naming where it looked.
std::filesystem::path find_nvdisasm(const std::filesystem::path& cuda_home);

/// The code sections of `cubin` as nvdisasm prints them (`nvdisasm -c /dev/stdin`): each kernel's
/// SASS under its mangled name. The cubin is the child's stdin, an anonymous memory file (nvdisasm
/// reads files, not pipes): nothing is left behind. Throws moejit::Error (io) when nvdisasm is
/// missing, cannot be started, or fails (its stderr in the error's log).
std::string disassemble(const std::filesystem::path& cuda_home, std::string_view cubin);

}  // namespace moejit::detail
