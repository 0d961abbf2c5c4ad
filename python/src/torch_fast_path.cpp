// op(...) on torch tensors in one C++ pass: OpCall is moejit.Op's base class, and its call
// binds the tensors (positionally or by name), checks each against its declaration -- a
// torch.Tensor on the op's device, of its declared dtype and shape (T from the first tensor that
// has it), C-contiguous -- and launches on torch's current stream. A call that does not fit
// (another kind of array, tokens= or stream=, a wrong tensor) goes, before anything runs, to
// Op._call in Python, whose checks (python/moejit/_tensors.py) take it or say what is wrong.
#include "module.hpp"

#include <moejit/error.hpp>
#include <moejit/op.hpp>

#include <nanobind/ndarray.h>

#include <array>
#include <cstdint>
#include <new>
#include <span>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace moejit::python {

namespace {

// DLPack's C exchange API (dlpack.h 1.2+, DLPackExchangeAPI): a table of C functions that a
// tensor type offers as `__dlpack_c_exchange_api__` (torch 2.10+). This module calls two of them.
struct DLPackExchangeAPI {
  struct Header {
    std::uint32_t major = 0, minor = 0;
    const Header* prev_api = nullptr;
  } header;
  void* managed_tensor_allocator = nullptr;
  void* managed_tensor_from_py_object_no_sync = nullptr;
  void* managed_tensor_to_py_object_no_sync = nullptr;
  int (*dltensor_from_py_object_no_sync)(void* py_object, nb::dlpack::dltensor* out) = nullptr;
  int (*current_work_stream)(std::int32_t device_type, std::int32_t device_id, void** out_stream) = nullptr;
};

constexpr std::int32_t kDLCPU = 1, kDLCUDA = 2;
// An address for a bound tensor of no elements (T = 0): never dereferenced, aligned for any dtype.
constexpr std::uintptr_t kEmptyAddress = 256;

// The table behind `api` (a capsule, or an int as the first torch versions gave it), or null
// where it is absent or of another major version.
const DLPackExchangeAPI* exchange_api_of(nb::handle api) {
  if (api.is_none()) return nullptr;
  void* p = PyCapsule_CheckExact(api.ptr()) ? PyCapsule_GetPointer(api.ptr(), "dlpack_exchange_api")
                                             : PyLong_AsVoidPtr(api.ptr());
  if (!p) {
    PyErr_Clear();
    return nullptr;
  }
  const auto* table = static_cast<const DLPackExchangeAPI*>(p);
  if (table->header.major != 1 || !table->dltensor_from_py_object_no_sync || !table->current_work_stream) return nullptr;
  return table;
}

nb::dlpack::dtype dlpack_dtype(DType t) {
  using code = nb::dlpack::dtype_code;
  const auto make = [](code c, int bits) {
    return nb::dlpack::dtype{static_cast<std::uint8_t>(c), static_cast<std::uint8_t>(bits), 1};
  };
  switch (t) {
    case DType::f32: return make(code::Float, 32);
    case DType::f16: return make(code::Float, 16);
    case DType::bf16: return make(code::Bfloat, 16);
    case DType::i32: return make(code::Int, 32);
    case DType::i64: return make(code::Int, 64);
  }
  return {};
}

// torch's is_contiguous() rule: row-major strides, dimensions of size 1 may have any stride, a
// tensor of no elements is contiguous.
bool c_contiguous(std::span<const std::int64_t> shape, const std::int64_t* strides) {
  if (!strides) return true;  // DLPack: compact row-major
  for (const auto size : shape) {
    if (size == 0) return true;
  }
  std::int64_t want = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (strides[d] != want) return false;
    want *= shape[d];
  }
  return true;
}

nb::object interned(const char* s) { return nb::steal(PyUnicode_InternFromString(s)); }

// Each tensor is read through DLPack's exchange API where torch offers it and the tensor is a
// plain torch.Tensor or nn.Parameter (one C call; NOTE: ~40 ns against ~200 for five Python
// attribute and method calls), else through those calls (older torch; subclasses, whose
// __torch_function__ may answer them).
class TorchFastPath {
 public:
  struct Torch {
    nb::tuple tensor_types;  // torch.Tensor first, then the subclasses DLPack may read (nn.Parameter)
    nb::object exchange_api;
    nb::object stream_getter;  // device -> raw stream handle, where there is no exchange API
  };

  TorchFastPath(const Op& op, nb::list dtypes, Torch torch, int device)
      : op_(op), stream_getter_(std::move(torch.stream_getter)), api_(exchange_api_of(torch.exchange_api)),
        device_(device), device_obj_(nb::int_(device)) {
    for (auto d : dtypes) dtypes_.push_back(nb::borrow(d));
    for (auto t : torch.tensor_types) tensor_types_.push_back(nb::borrow(t));
    if (dtypes_.size() != op.tensors().size() || tensor_types_.empty() || !PyType_Check(tensor_types_[0].ptr())) {
      throw Error({.kind = ErrorKind::internal, .message = "torch fast path: one dtype per tensor and torch.Tensor expected"});
    }
    for (std::size_t i = 0; i < op.tensors().size(); ++i) {
      const auto& d = op.tensors()[i];
      dlpack_dtypes_.push_back(dlpack_dtype(d.dtype));
      keywords_.push_back(interned(d.name.c_str()));
      if (d.role == TensorRole::output) outputs_.push_back(i);
    }
    for (const auto& k : keywords_) hashes_.push_back(PyObject_Hash(k.ptr()));
  }

  // op(*args, **kwargs): the outputs (one, or a tuple), or a null object, before anything runs,
  // where the call is not one this path takes.
  nb::object call(PyObject* args, PyObject* kwargs) const {
    std::array<PyObject*, kMaxInline> bound{};
    std::int64_t expected_rows = 0;
    if (!bind(args, kwargs, bound, expected_rows) || !launch(bound, expected_rows)) return {};
    if (outputs_.size() == 1) return nb::borrow(item(bound[outputs_[0]]));
    nb::object out = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(outputs_.size())));
    if (!out.is_valid()) throw nb::python_error();
    for (std::size_t k = 0; k < outputs_.size(); ++k) {
      PyObject* t = item(bound[outputs_[k]]);
      Py_INCREF(t);
      PyTuple_SetItem(out.ptr(), static_cast<Py_ssize_t>(k), t);  // steals t
    }
    return out;
  }

  bool uses_dlpack() const { return api_ != nullptr; }

  // The same on a tuple of tensors in declaration order: whether it launched.
  bool operator()(nb::handle tensors, std::int64_t expected_rows) const {
    std::array<PyObject*, kMaxInline> bound{};
    return bind(tensors.ptr(), nullptr, bound, expected_rows) && launch(bound, expected_rows);
  }

 private:
  static PyObject* item(PyObject* t) { return t ? t : Py_None; }

  // Positional tensors, then keywords: tensors by name, expected_rows, tokens=None and
  // stream=None (as if left out); false for anything else (more tensors than declared, a tensor
  // given twice, a token count or a stream, an unknown name).
  bool bind(PyObject* args, PyObject* kwargs, std::span<PyObject*, kMaxInline> bound, std::int64_t& expected_rows) const {
    const Py_ssize_t n = PyTuple_Check(args) ? PyTuple_Size(args) : -1;
    const std::size_t tensors = keywords_.size() - kParams;
    if (n < 0 || static_cast<std::size_t>(n) > tensors || tensors > kMaxInline) return false;
    for (Py_ssize_t i = 0; i < n; ++i) bound[static_cast<std::size_t>(i)] = PyTuple_GetItem(args, i);  // borrowed
    if (!kwargs) return true;
    Py_ssize_t pos = 0;
    PyObject *key = nullptr, *value = nullptr;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      const std::size_t k = keyword(key);
      if (k == kExpectedRows) {
        int overflow = 0;
        if (!PyLong_CheckExact(value)) return false;
        expected_rows = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow) return false;
      } else if (k < kParams) {
        if (value != Py_None) return false;
      } else if (k == keywords_.size() || k - kParams < static_cast<std::size_t>(n)) {
        return false;
      } else {
        bound[k - kParams] = value;
      }
    }
    return true;
  }

  // The index of `key` in keywords_ (keywords_.size(): none). NOTE: a call's keywords are
  // interned, as keywords_ are: compared by address first, by value only for names built at run
  // time (op(**{name: t})).
  std::size_t keyword(PyObject* key) const {
    for (std::size_t k = 0; k < keywords_.size(); ++k) {
      if (key == keywords_[k].ptr()) return k;
    }
    const Py_hash_t hash = PyObject_Hash(key);  // cached in the str
    for (std::size_t k = 0; k < keywords_.size(); ++k) {
      if (hash == hashes_[k] && PyUnicode_Compare(key, keywords_[k].ptr()) == 0) return k;
    }
    if (PyErr_Occurred()) PyErr_Clear();
    return keywords_.size();
  }

  // Checks the bound tensors (null or None: unbound) and launches: false, before anything runs,
  // where one does not fit.
  bool launch(std::span<PyObject* const, kMaxInline> bound, std::int64_t expected_rows) const {
    const auto& decls = op_.tensors();
    std::array<Buffer, kMaxInline> buffers;
    std::int64_t tokens = -1;
    for (std::size_t i = 0; i < decls.size(); ++i) {
      PyObject* t = bound[i];
      if (!t || t == Py_None) {
        if (!decls[i].optional) return false;
        continue;  // left unbound
      }
      if (!fits(t, i, tokens, buffers[i].ptr)) {
        if (PyErr_Occurred()) PyErr_Clear();
        return false;
      }
    }
    if (tokens < 0) return false;
    for (std::size_t i = 0; i < decls.size(); ++i) buffers[i].bytes = buffers[i].ptr ? decls[i].bytes_for(tokens) : 0;
    const CUstream stream = current_stream();
    nb::gil_scoped_release release;
    op_.launch(std::span<const Buffer>(buffers.data(), decls.size()), tokens, stream, {.expected_rows = expected_rows});
    return true;
  }

  bool fits(PyObject* t, std::size_t i, std::int64_t& tokens, void*& address) const {
    auto* type = reinterpret_cast<PyObject*>(Py_TYPE(t));
    if (api_) {
      for (const auto& plain : tensor_types_) {
        if (type == plain.ptr()) return fits_dlpack(t, i, tokens, address);
      }
    }
    return PyObject_TypeCheck(t, reinterpret_cast<PyTypeObject*>(tensor_types_[0].ptr())) && fits_probed(t, i, tokens, address);
  }

  // The shape against the declaration; T from the first dimension that is T.
  static bool shape_fits(const TensorDecl& decl, std::span<const std::int64_t> shape, std::int64_t& tokens) {
    if (shape.size() != decl.shape.size()) return false;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (decl.shape[d].tokens && tokens < 0) tokens = shape[d];
      if (shape[d] < 0 || shape[d] != decl.shape[d].resolve(tokens)) return false;
    }
    return true;
  }

  bool fits_dlpack(PyObject* t, std::size_t i, std::int64_t& tokens, void*& address) const {
    nb::dlpack::dltensor dl;
    if (api_->dltensor_from_py_object_no_sync(t, &dl) != 0) return false;
    const bool on_device = device_ < 0 ? dl.device.device_type == kDLCPU
                                       : dl.device.device_type == kDLCUDA && dl.device.device_id == device_;
    if (!on_device || dl.dtype != dlpack_dtypes_[i] || dl.ndim < 0) return false;
    const std::span<const std::int64_t> shape(dl.shape, static_cast<std::size_t>(dl.ndim));
    if (!shape_fits(op_.tensors()[i], shape, tokens) || !c_contiguous(shape, dl.strides)) return false;
    const auto value = reinterpret_cast<std::uintptr_t>(dl.data) + dl.byte_offset;
    address = reinterpret_cast<void*>(value ? value : kEmptyAddress);
    return true;
  }

  // NOTE: t.method() through vectorcall where the (limited) API has it: the cheapest call there is.
  static nb::object call_method(PyObject* t, const nb::object& name) {
#if !defined(Py_LIMITED_API) || Py_LIMITED_API >= 0x030C0000
    PyObject* args[] = {t};
    return nb::steal(PyObject_VectorcallMethod(name.ptr(), args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
#else
    return nb::steal(PyObject_CallMethodObjArgs(t, name.ptr(), nullptr));
#endif
  }

  bool fits_probed(PyObject* t, std::size_t i, std::int64_t& tokens, void*& address) const {
    nb::object device = call_method(t, get_device_);
    if (!device.is_valid() || PyLong_AsLong(device.ptr()) != device_) return false;
    nb::object dtype = nb::steal(PyObject_GetAttr(t, dtype_.ptr()));
    if (!dtype.is_valid() || !dtype.is(dtypes_[i])) return false;
    nb::object shape = nb::steal(PyObject_GetAttr(t, shape_.ptr()));
    const auto& decl = op_.tensors()[i];
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
    address = reinterpret_cast<void*>(value ? static_cast<std::uintptr_t>(value) : kEmptyAddress);
    return true;
  }

  // torch's current stream of the op's device (none for CPU tensors).
  CUstream current_stream() const {
    if (api_) {
      void* stream = nullptr;
      const bool cuda = device_ >= 0;
      if (api_->current_work_stream(cuda ? kDLCUDA : kDLCPU, cuda ? device_ : 0, &stream) != 0) throw nb::python_error();
      return static_cast<CUstream>(stream);
    }
    nb::object handle = stream_getter_(device_obj_);
    const auto stream = PyLong_AsUnsignedLongLong(handle.ptr());
    if (PyErr_Occurred()) throw nb::python_error();
    return reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(stream));
  }

  const Op& op_;
  std::vector<nb::object> dtypes_, tensor_types_;
  // Op._call's keyword parameters first (they shadow a tensor of the same name, as there), then
  // the declared tensors' names.
  static constexpr std::size_t kExpectedRows = 0, kParams = 3;
  std::vector<nb::object> keywords_ = {interned("expected_rows"), interned("tokens"), interned("stream")};
  std::vector<Py_hash_t> hashes_;
  std::vector<nb::dlpack::dtype> dlpack_dtypes_;
  std::vector<std::size_t> outputs_;
  nb::object stream_getter_;
  const DLPackExchangeAPI* api_;
  int device_;
  nb::object device_obj_;
  nb::object get_device_ = interned("get_device"), dtype_ = interned("dtype"), shape_ = interned("shape"),
             is_contiguous_ = interned("is_contiguous"), data_ptr_ = interned("data_ptr");
};

// moejit.Op's C++ base: its call slot (op_call) runs the fast path once the first call on torch
// tensors has made it (Op._fast), and Op._call for every call that path does not take.
struct OpCall {
  nb::object fast = nb::none();
  const TorchFastPath* fast_path = nullptr;
  nb::object slow_name = interned("_call");
};

// NOTE: a type slot, not a bound __call__: the interpreter calls it directly, with no Python
// frame and no argument conversion (~0.4 us a call with one).
PyObject* op_call(PyObject* self, PyObject* args, PyObject* kwargs) noexcept {
  try {
    nb::handle h(self);
    if (!nb::inst_ready(h)) {
      PyErr_SetString(PyExc_TypeError, "moejit.Op: OpCall.__init__ was not called");
      return nullptr;
    }
    const auto& c = *nb::inst_ptr<OpCall>(h);
    if (c.fast_path) {
      nb::object keep = c.fast;  // NOTE: the launch releases the GIL; another thread may reset _fast
      nb::object out = c.fast_path->call(args, kwargs);
      if (out.is_valid()) return out.release().ptr();
    }
    nb::object slow = nb::steal(PyObject_GetAttr(self, c.slow_name.ptr()));
    return slow.is_valid() ? PyObject_Call(slow.ptr(), args, kwargs) : nullptr;
  } catch (const Error& e) {
    raise(e);
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyType_Slot op_call_slots[] = {{Py_tp_call, reinterpret_cast<void*>(op_call)}, {0, nullptr}};

}  // namespace

void bind_torch_fast_path(nb::module_& m) {
  nb::class_<TorchFastPath>(m, "TorchFastPath")
      .def(
          "__init__",
          [](TorchFastPath* self, const Op& op, nb::list dtypes, nb::tuple tensor_types, nb::object exchange_api,
             nb::object stream_getter, int device) {
            TorchFastPath::Torch torch{std::move(tensor_types), std::move(exchange_api), std::move(stream_getter)};
            new (self) TorchFastPath(op, std::move(dtypes), std::move(torch), device);
          },
          "op"_a, "dtypes"_a, "tensor_types"_a, "exchange_api"_a.none(), "stream_getter"_a, "device"_a, nb::keep_alive<1, 2>())
      .def("__call__", &TorchFastPath::operator(), "tensors"_a, "expected_rows"_a)
      .def_prop_ro("uses_dlpack", &TorchFastPath::uses_dlpack, "whether tensors are read through DLPack's exchange API");

  nb::class_<OpCall>(m, "OpCall", nb::type_slots(op_call_slots), "moejit.Op's base: its call, in C++")
      .def(nb::init<>())
      .def_prop_rw(
          "_fast", [](const OpCall& c) { return c.fast; },
          [](OpCall& c, nb::object fast) {
            c.fast_path = fast.is_none() ? nullptr : nb::cast<const TorchFastPath*>(fast);
            c.fast = std::move(fast);
          },
          nb::for_setter(nb::arg("fast").none()));
}

}  // namespace moejit::python
