// The torch fast path of Op.__call__: a call on torch tensors checked and launched in C++.
#include "module.hpp"

#include <moejit/error.hpp>
#include <moejit/op.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace moejit::python {

namespace {

// A call on torch tensors, checked and launched in one C++ pass: each tensor a torch.Tensor on
// the op's device, of its declared dtype and shape (T from the first tensor that has it),
// contiguous; then the launch on torch's current stream. Anything else returns false before
// anything runs, and Python's checks (python/moejit/_tensors.py) take the call and say what is
// wrong. NOTE: Python's own version of these checks cost ~0.35 us a tensor; this ~0.15.
class TorchFastPath {
 public:
  TorchFastPath(const Op& op, nb::list dtypes, nb::handle tensor_type, nb::handle stream_getter, int device)
      : op_(op), tensor_type_(nb::borrow(tensor_type)), stream_getter_(nb::borrow(stream_getter)), device_(device),
        device_obj_(nb::int_(device)) {
    for (auto d : dtypes) dtypes_.push_back(nb::borrow(d));
    if (dtypes_.size() != op.tensors().size() || !PyType_Check(tensor_type.ptr())) {
      throw Error({.kind = ErrorKind::internal, .message = "torch fast path: one dtype per tensor and torch.Tensor expected"});
    }
  }

  bool operator()(nb::handle tensors, std::int64_t expected_rows) const {
    const auto& decls = op_.tensors();
    const Py_ssize_t n = PyTuple_Size(tensors.ptr());
    if (n < 0) {
      PyErr_Clear();
      return false;
    }
    if (static_cast<std::size_t>(n) != decls.size() || decls.size() > kMaxInline) return false;
    std::array<Buffer, kMaxInline> buffers;
    std::int64_t tokens = -1;
    auto* type = reinterpret_cast<PyTypeObject*>(tensor_type_.ptr());
    for (std::size_t i = 0; i < decls.size(); ++i) {
      PyObject* t = PyTuple_GetItem(tensors.ptr(), static_cast<Py_ssize_t>(i));  // borrowed
      if (t == Py_None && decls[i].optional) {
        buffers[i].ptr = nullptr;  // left unbound
        continue;
      }
      if (!t || !PyObject_TypeCheck(t, type) || !tensor_fits(t, decls[i], i, tokens, buffers[i].ptr)) {
        if (PyErr_Occurred()) PyErr_Clear();
        return false;
      }
    }
    if (tokens < 0) return false;
    for (std::size_t i = 0; i < decls.size(); ++i) buffers[i].bytes = buffers[i].ptr ? decls[i].bytes_for(tokens) : 0;
    nb::object handle = stream_getter_(device_obj_);
    const auto stream = PyLong_AsUnsignedLongLong(handle.ptr());
    if (PyErr_Occurred()) throw nb::python_error();
    nb::gil_scoped_release release;
    op_.launch(std::span<const Buffer>(buffers.data(), decls.size()), tokens, reinterpret_cast<CUstream>(stream),
               {.expected_rows = expected_rows});
    return true;
  }

 private:
  // NOTE: t.method() through vectorcall where the (limited) API has it: the cheapest call there is.
  static nb::object call_method(PyObject* t, const nb::object& name) {
#if !defined(Py_LIMITED_API) || Py_LIMITED_API >= 0x030C0000
    PyObject* args[] = {t};
    return nb::steal(PyObject_VectorcallMethod(name.ptr(), args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
#else
    return nb::steal(PyObject_CallMethodObjArgs(t, name.ptr(), nullptr));
#endif
  }

  bool tensor_fits(PyObject* t, const TensorDecl& decl, std::size_t i, std::int64_t& tokens, void*& address) const {
    nb::object device = call_method(t, get_device_);
    if (!device.is_valid() || PyLong_AsLong(device.ptr()) != device_) return false;
    nb::object dtype = nb::steal(PyObject_GetAttr(t, dtype_.ptr()));
    if (!dtype.is_valid() || !dtype.is(dtypes_[i])) return false;
    nb::object shape = nb::steal(PyObject_GetAttr(t, shape_.ptr()));
    if (!shape.is_valid() || PyTuple_Size(shape.ptr()) != static_cast<Py_ssize_t>(decl.shape.size())) return false;
    for (std::size_t d = 0; d < decl.shape.size(); ++d) {
      const auto size = PyLong_AsLongLong(PyTuple_GetItem(shape.ptr(), static_cast<Py_ssize_t>(d)));
      if (decl.shape[d].tokens && tokens < 0) tokens = size;
      if (size < 0 || size != decl.shape[d].resolve(tokens)) return false;
    }
    nb::object contiguous = call_method(t, is_contiguous_);
    if (!contiguous.is_valid() || contiguous.ptr() != Py_True) return false;
    nb::object ptr = call_method(t, data_ptr_);
    if (!ptr.is_valid()) return false;
    const auto value = PyLong_AsUnsignedLongLong(ptr.ptr());
    if (PyErr_Occurred()) return false;
    // A tensor of no elements (T = 0) may have no address; launch reads none of it.
    address = reinterpret_cast<void*>(static_cast<std::uintptr_t>(value ? value : 256));
    return true;
  }

  static nb::object interned(const char* s) { return nb::steal(PyUnicode_InternFromString(s)); }

  const Op& op_;
  std::vector<nb::object> dtypes_;
  nb::object tensor_type_, stream_getter_;
  int device_;
  nb::object device_obj_;
  nb::object get_device_ = interned("get_device"), dtype_ = interned("dtype"), shape_ = interned("shape"),
             is_contiguous_ = interned("is_contiguous"), data_ptr_ = interned("data_ptr");
};

}  // namespace

void bind_torch_fast_path(nb::module_& m) {
  nb::class_<TorchFastPath>(m, "TorchFastPath")
      .def(nb::init<const Op&, nb::list, nb::handle, nb::handle, int>(), "op"_a, "dtypes"_a, "tensor_type"_a,
           "stream_getter"_a, "device"_a, nb::keep_alive<1, 2>())
      .def("__call__", &TorchFastPath::operator(), "tensors"_a, "expected_rows"_a);
}

}  // namespace moejit::python
