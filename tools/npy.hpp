#pragma once
/// Reading and writing NumPy .npy files: how the CLI exchanges tensors with Python.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <moejit/dtype.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace moejit::tools {

/// The element types moejit exchanges through .npy files. bfloat16 travels as uint16 ('<u2')
/// holding the raw bits, because NumPy has no bfloat16.
enum class NpyType { f32, f16, u16, i32, i64 };

/// The little-endian descr: "<f4", "<f2", "<u2", "<i4", "<i8".
std::string_view npy_descr(NpyType t) noexcept;
std::size_t npy_itemsize(NpyType t) noexcept;
/// The NpyType a moejit dtype travels as (bf16 -> u16).
NpyType npy_type_for(DType t) noexcept;
/// The NumPy name: "float32", "float16", "uint16", "int32", "int64".
std::string_view npy_type_name(NpyType t) noexcept;

struct NpyArray {
  NpyType type = NpyType::f32;
  std::vector<std::int64_t> shape;  ///< empty for a scalar
  std::string data;  ///< raw little-endian element bytes, C order, product(shape) * itemsize

  /// The product of `shape` (1 for a scalar). Throws moejit::Error (internal) when a dimension
  /// is negative or the product overflows.
  std::int64_t elements() const;
};

/// Parses .npy bytes: format versions 1.0, 2.0 and 3.0; C order only; little-endian only
/// ('<', or '|' / '=' where that means the same on a little-endian host for these types).
/// Throws moejit::Error (kind input) for: bad magic, unsupported version, malformed header dict
/// (missing, unknown or repeated keys, bad shape tuple, trailing garbage), fortran_order True
/// ("not C order"), big-endian descr ("big-endian"), an unsupported dtype (e.g. '<f8', '|b1',
/// object), a shape too large to address, and data shorter or longer than the shape needs
/// ("truncated" / "extra bytes"). `file` names the file in messages; `name` (may be empty) is
/// the tensor name put in Error::pointer.
NpyArray parse_npy(std::string_view bytes, std::string_view file, std::string_view name = {});

/// The largest .npy file moejit reads.
inline constexpr std::uint64_t kMaxNpyBytes = std::uint64_t{16} << 30;

/// Reads and parses a whole file: a regular file of at most kMaxNpyBytes (a FIFO, device or
/// directory is refused before it is read). Throws moejit::Error (input) when it cannot be read,
/// and as parse_npy for its contents.
NpyArray read_npy(const std::filesystem::path& file, std::string_view name = {});

/// Serializes as version 1.0 (2.0 when the header would exceed 65535 bytes), byte for byte as
/// NumPy's np.save does: the header is padded with spaces and a final '\n' so that the data
/// starts at a multiple of 64 bytes. Throws moejit::Error (internal) when `array.data` does not
/// hold exactly elements() * itemsize bytes.
std::string format_npy(const NpyArray& array);

/// Writes format_npy(array) as detail::write_output_file() writes a file: whole or not at all,
/// never through a link. Throws moejit::Error (usage for a bad path, io on a failed write).
void write_npy(const std::filesystem::path& file, const NpyArray& array);

}  // namespace moejit::tools
