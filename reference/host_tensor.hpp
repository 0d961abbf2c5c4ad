#pragma once
// Host-side tensors for references, checks and `moejit run`: a dtype, a shape and raw bytes.

#include <moejit/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace moejit::reference {

struct HostTensor {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;

  static HostTensor zeros(DType dtype, std::vector<std::int64_t> shape);
  static HostTensor like(const TensorDecl& decl, std::int64_t tokens) { return zeros(decl.dtype, decl.shape_for(tokens)); }

  std::size_t elements() const noexcept { return data.size() / size_of(dtype); }
  std::size_t bytes() const noexcept { return data.size(); }
  template <class T>
  T* as() noexcept { return reinterpret_cast<T*>(data.data()); }
  template <class T>
  const T* as() const noexcept { return reinterpret_cast<const T*>(data.data()); }
  /// Fills every byte with `byte` (poison before a kernel writes, to catch unwritten outputs).
  void fill_bytes(std::byte byte) {
    if (!data.empty()) std::memset(data.data(), static_cast<int>(byte), data.size());  // memset(nullptr, ., 0) is undefined
  }
};

using Rng = std::mt19937_64;

}  // namespace moejit::reference
