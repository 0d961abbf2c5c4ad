#pragma once
// What the source files of moejit._moejit share.
#include <nanobind/nanobind.h>

#include <cstddef>

namespace moejit {
class Error;
}

namespace moejit::python {

// The most tensors one op declares is about a dozen: buffers live on the stack.
constexpr std::size_t kMaxInline = 32;

// Sets the Python exception for `e`: its kind's class, str() the C++ what(), every field an
// attribute (bindings.cpp).
void raise(const Error& e);

// TorchFastPath and OpCall, moejit.Op's base class (torch_fast_path.cpp).
void bind_torch_fast_path(nanobind::module_& m);

}  // namespace moejit::python
