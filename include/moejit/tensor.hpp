#pragma once
/// The tensors an op reads and writes. Each op declares them once (OpSpec::tensors); the CLI's
/// `run`, `check` and `bench` and the runtime's argument checks are all driven by these.

#include <moejit/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace moejit {

enum class TensorRole { input, output };

/// One dimension: a fixed size, or the run-time token count T.
struct Extent {
  std::int64_t value = 0;
  bool tokens = false;

  static Extent fixed(std::int64_t v) { return {v, false}; }
  static Extent token_count() { return {0, true}; }
  std::int64_t resolve(std::int64_t t) const { return tokens ? t : value; }
};

/// The alignment of tensors the kernels access 16 bytes at a time (TensorDecl::align).
inline constexpr std::size_t kVectorAlign = 16;

struct TensorDecl {
  std::string name;
  DType dtype = DType::f32;
  std::vector<Extent> shape;
  TensorRole role = TensorRole::input;
  bool optional = false;        ///< may be left unbound
  bool keeps_unwritten = false; ///< an output some of whose elements are not written (masked rows)
  /// Bytes its address must be a multiple of, where more than its element's: a tensor the kernels
  /// read or write 16 bytes at a time (or through TMA) with no path for other addresses.
  std::size_t align = 0;
  std::string note;             ///< one line for `--describe`

  std::vector<std::int64_t> shape_for(std::int64_t tokens) const;
  std::int64_t elements_for(std::int64_t tokens) const;
  std::size_t bytes_for(std::int64_t tokens) const;
  /// "[T, 896]" or "[896, T, 6144]".
  std::string shape_text() const;
};

/// A device buffer bound to one declared tensor: its address and how many bytes it holds.
struct Buffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
};

}  // namespace moejit
