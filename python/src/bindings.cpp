// moejit._moejit: the C++ API for Python (nanobind). What is Python's own -- the tensor checks
// on torch / DLPack / __cuda_array_interface__ objects, the streams, the exception classes and
// the torch.library integration -- is in python/moejit/; this module binds the library, raises
// moejit::Error as those exception classes, and releases the GIL around compiles and launches.
#include <moejit/context.hpp>
#include <moejit/error.hpp>
#include <moejit/moe_layer.hpp>
#include <moejit/op.hpp>
#include <moejit/options.hpp>
#include <moejit/spec.hpp>
#include <moejit/warmup.hpp>

#include "module.hpp"

#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <limits>

namespace nb = nanobind;
using namespace nb::literals;

namespace moejit::python {

namespace {

// The exception class of each ErrorKind (a dict set by moejit/__init__.py), held for the life of
// the process: the translator runs until the interpreter ends.
PyObject* g_error_classes = nullptr;

std::string_view kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::spec: return "spec";
    case ErrorKind::input: return "input";
    case ErrorKind::usage: return "usage";
    case ErrorKind::compile: return "compile";
    case ErrorKind::nvrtc: return "nvrtc";
    case ErrorKind::driver: return "driver";
    case ErrorKind::nccl: return "nccl";
    case ErrorKind::cache: return "cache";
    case ErrorKind::io: return "io";
    case ErrorKind::internal: return "internal";
  }
  return "internal";
}

ErrorKind parse_kind(std::string_view name) {
  for (auto k : {ErrorKind::spec, ErrorKind::input, ErrorKind::usage, ErrorKind::compile, ErrorKind::nvrtc, ErrorKind::driver,
                 ErrorKind::nccl, ErrorKind::cache, ErrorKind::io, ErrorKind::internal}) {
    if (kind_name(k) == name) return k;
  }
  throw Error({.kind = ErrorKind::usage, .message = "unknown error kind", .found = std::string(name),
               .expected = "spec, input, usage, compile, nvrtc, driver, nccl, cache, io or internal"});
}

// The Python exception for `e`: its kind's class, str() the C++ what(), every field an attribute.
nb::object exception_of(const Error& e) {
  nb::object cls;
  if (g_error_classes) {
    nb::handle classes(g_error_classes);
    nb::str key(kind_name(e.kind()).data(), kind_name(e.kind()).size());
    if (PyDict_Contains(classes.ptr(), key.ptr()) == 1) cls = classes[key];
  }
  if (!cls.is_valid()) cls = nb::borrow(PyExc_RuntimeError);
  nb::object inst = cls(nb::str(e.what()));
  const auto& f = e.fields();
  inst.attr("kind") = nb::str(kind_name(e.kind()).data());
  inst.attr("bad_input") = e.is_bad_input();
  const std::pair<const char*, const std::string*> fields[] = {
      {"message", &f.message}, {"file", &f.file}, {"pointer", &f.pointer}, {"call", &f.call},
      {"code", &f.code},       {"found", &f.found}, {"expected", &f.expected}, {"options", &f.options},
      {"log", &f.log},         {"source", &f.source}};
  for (const auto& [name, value] : fields) inst.attr(name) = nb::str(value->data(), value->size());
  return inst;
}

// An op spec of a loaded Spec, shared with the ops loaded from it.
struct PyOpSpec {
  std::shared_ptr<const OpSpec> op;
};

std::string_view role_name(TensorRole role) { return role == TensorRole::input ? "input" : "output"; }

nb::tuple shape_tuple(const TensorDecl& d) {
  nb::list items;
  for (const auto& e : d.shape) {
    if (e.tokens) items.append(nb::str("T"));
    else items.append(e.value);
  }
  return nb::tuple(items);
}

// What Op.__call__ hands over once Python has checked every tensor: one address (or 0 for an
// unbound optional tensor) per declared tensor, in order; sizes follow from the declaration.
void launch_checked(const Op& op, nb::list ptrs, std::int64_t tokens, std::uintptr_t stream, std::int64_t expected_rows) {
  const auto& decls = op.tensors();
  const auto n = static_cast<std::size_t>(nb::len(ptrs));
  std::array<Buffer, kMaxInline> inline_buffers;
  std::vector<Buffer> heap;
  std::span<Buffer> buffers(inline_buffers.data(), std::min(n, kMaxInline));
  if (n > kMaxInline) {
    heap.resize(n);
    buffers = heap;
  }
  // NOTE: a token count Op::launch refuses gets no byte count (it would overflow); launch then
  // names the token count.
  const bool tokens_ok = tokens >= 0 && tokens < (std::int64_t{1} << 31);
  for (std::size_t i = 0; i < n; ++i) {
    PyObject* item = PyList_GetItem(ptrs.ptr(), static_cast<Py_ssize_t>(i));  // borrowed
    const auto address = PyLong_AsUnsignedLongLong(item);
    if (address == static_cast<unsigned long long>(-1) && PyErr_Occurred()) throw nb::python_error();
    buffers[i].ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
    buffers[i].bytes = address && tokens_ok && i < decls.size() ? decls[i].bytes_for(tokens) : 0;
  }
  nb::gil_scoped_release release;
  op.launch(buffers, tokens, reinterpret_cast<CUstream>(stream), {.expected_rows = expected_rows});
}

// An op that launches nothing and records what Op::launch handed it: the tests drive Op.__call__,
// its checks and the torch fast path through it on machines with no GPU (and bench_python.py
// measures the Python side with it).
class RecordingOp final : public Op {
 public:
  explicit RecordingOp(std::shared_ptr<const OpSpec> spec) : Op(std::move(spec)) {}
  struct Launch {
    std::int64_t tokens = -1;
    std::vector<std::pair<std::uintptr_t, std::size_t>> buffers;
    std::uintptr_t stream = 0;
    std::int64_t expected_rows = 0;
    std::int64_t count = 0;
  };
  mutable Launch last;

 private:
  void do_launch(std::span<const Buffer> buffers, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const override {
    last.tokens = tokens;
    last.buffers.clear();
    for (const auto& b : buffers) last.buffers.emplace_back(reinterpret_cast<std::uintptr_t>(b.ptr), b.bytes);
    last.stream = reinterpret_cast<std::uintptr_t>(stream);
    last.expected_rows = hints.expected_rows;
    ++last.count;
  }
};

// The raw API: one (address, bytes) pair per declared tensor, as Op::launch takes them.
void launch_raw(const Op& op, const std::vector<std::pair<std::uintptr_t, std::size_t>>& buffers, std::int64_t tokens,
                std::uintptr_t stream, std::int64_t expected_rows, bool chained) {
  std::vector<Buffer> b;
  b.reserve(buffers.size());
  for (const auto& [ptr, bytes] : buffers) b.push_back({reinterpret_cast<void*>(ptr), bytes});
  nb::gil_scoped_release release;
  op.launch(b, tokens, reinterpret_cast<CUstream>(stream), {.expected_rows = expected_rows, .chained = chained});
}

// Host time of `calls` back-to-back C++ launches, in seconds (bench/bench_python.py's baseline).
double time_launches(const Op& op, const std::vector<std::pair<std::uintptr_t, std::size_t>>& buffers, std::int64_t tokens,
                     std::uintptr_t stream, int calls) {
  std::vector<Buffer> b;
  for (const auto& [ptr, bytes] : buffers) b.push_back({reinterpret_cast<void*>(ptr), bytes});
  nb::gil_scoped_release release;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) op.launch(b, tokens, reinterpret_cast<CUstream>(stream));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string dlpack_dtype_name(nb::dlpack::dtype t) {
  using code = nb::dlpack::dtype_code;
  const auto c = static_cast<code>(t.code);
  const char* kind = c == code::Int ? "int" : c == code::UInt ? "uint" : c == code::Float ? "float"
                   : c == code::Bfloat ? "bfloat" : c == code::Complex ? "complex" : c == code::Bool ? "bool" : "unknown";
  if (c == code::Bool) return "bool";
  return fmt::format("{}{}{}", kind, t.bits, t.lanes == 1 ? "" : fmt::format("x{}", t.lanes));
}

// (device type, device id, address, shape, strides in elements, dtype) of anything nanobind
// imports as an array: DLPack (__dlpack__), the buffer protocol (NumPy). Reads no data.
nb::tuple describe(nb::ndarray<nb::ro> a) {
  nb::list shape, strides;
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    shape.append(a.shape(i));
    strides.append(a.stride(i));
  }
  const auto address = reinterpret_cast<std::uintptr_t>(a.data());
  return nb::make_tuple(a.device_type(), a.device_id(), address, nb::tuple(shape), nb::tuple(strides), dlpack_dtype_name(a.dtype()));
}

// Options from the environment, then what the caller passed.
Options options_of(std::optional<std::string> cache_dir, std::optional<std::string> cuda_home, std::optional<unsigned> jobs,
                   std::optional<bool> disk_cache, std::optional<bool> programmatic_launch) {
  auto o = Options::from_environment();
  if (cache_dir) o.cache_dir = *cache_dir;
  if (cuda_home) o.cuda_home = *cuda_home;
  if (jobs) {
    if (*jobs < 1 || *jobs > kMaxJobs) {
      throw Error({.kind = ErrorKind::usage, .message = "jobs out of range", .found = std::to_string(*jobs),
                   .expected = fmt::format("1 to {}", kMaxJobs)});
    }
    o.jobs = *jobs;
  }
  if (disk_cache) o.disk_cache = *disk_cache;
  if (programmatic_launch) o.programmatic_launch = *programmatic_launch;
  return o;
}

// Warmup as `moejit warmup` runs it (moejit::warmup): every contract of the specs for their
// archs (or `archs`), each key once, on a thread pool; failures are reported, not thrown.
nb::dict warmup_specs(const std::vector<std::string>& paths, std::optional<unsigned> jobs, const std::vector<std::string>& archs,
                std::optional<std::string> cache_dir) {
  const auto options = options_of(std::move(cache_dir), std::nullopt, jobs, std::nullopt, std::nullopt);
  WarmupReport report;
  {
    nb::gil_scoped_release release;
    std::vector<Spec> specs;
    for (const auto& file : spec_files(paths)) specs.push_back(load_spec(file));
    report = moejit::warmup(specs, options, archs);
  }
  nb::list entries;
  for (const auto& e : report.entries) {
    nb::dict d;
    d["labels"] = e.labels;
    d["arch"] = e.arch;
    d["source"] = e.source;
    d["seconds"] = e.seconds;
    d["key"] = e.key;
    d["registers"] = e.registers;
    d["spill_bytes"] = e.spill_bytes;
    d["error"] = e.error;
    d["bad_input"] = e.bad_input;
    entries.append(d);
  }
  nb::dict summary;
  summary["specs"] = report.specs;
  summary["jobs"] = report.jobs;
  summary["entries"] = entries;
  summary["seconds"] = report.seconds;
  summary["threads"] = report.threads;
  summary["cache"] = report.cache;
  return summary;
}

}  // namespace

void raise(const Error& e) {
  nb::object inst = exception_of(e);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(inst.ptr())), inst.ptr());
}

}  // namespace moejit::python

NB_MODULE(_moejit, m) {
  using namespace moejit;
  using namespace moejit::python;
  m.doc() = "moejit's C++ API (use the moejit package)";
  // NOTE: ops registered with torch.library live until the process ends, held by torch's
  // registry past nanobind's teardown: that is their life, not a leak to report.
  nb::set_leak_warnings(false);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise(e);
    }
  });
  m.def("_set_error_classes", [](nb::dict classes) {
    Py_XDECREF(g_error_classes);
    g_error_classes = classes.ptr();
    Py_INCREF(g_error_classes);
  });
  m.def(
      "_make_error",
      [](std::string_view kind, std::string message, std::string file, std::string pointer, std::string found,
         std::string expected) {
        return exception_of(Error({.kind = parse_kind(kind), .message = std::move(message), .file = std::move(file),
                                   .pointer = std::move(pointer), .found = std::move(found), .expected = std::move(expected)}));
      },
      "kind"_a, "message"_a, "file"_a = "", "pointer"_a = "", "found"_a = "", "expected"_a = "",
      "The exception moejit raises for these fields (str() as moejit::Error::what()).");
  m.def("_describe", &describe, "array"_a);

  nb::class_<TensorDecl>(m, "TensorDecl", "One tensor an op reads or writes (OpSpec::tensors()).")
      .def_ro("name", &TensorDecl::name)
      .def_prop_ro("dtype", [](const TensorDecl& d) { return std::string(numpy_name(d.dtype)); }, "NumPy spelling: bfloat16, float32, ...")
      .def_prop_ro("spec_dtype", [](const TensorDecl& d) { return std::string(spec_name(d.dtype)); }, "spec spelling: bf16, fp32, ...")
      .def_prop_ro("itemsize", [](const TensorDecl& d) { return size_of(d.dtype); })
      .def_prop_ro("shape", &shape_tuple, "sizes, with 'T' for the token count")
      .def_prop_ro("token_dim", [](const TensorDecl& d) -> std::optional<std::size_t> {
        for (std::size_t i = 0; i < d.shape.size(); ++i) {
          if (d.shape[i].tokens) return i;
        }
        return std::nullopt;
      }, "the index of the T dimension, or None")
      .def_prop_ro("role", [](const TensorDecl& d) { return std::string(role_name(d.role)); }, "'input' or 'output'")
      .def_ro("optional", &TensorDecl::optional)
      .def_ro("keeps_unwritten", &TensorDecl::keeps_unwritten)
      .def_ro("align", &TensorDecl::align, "bytes the address must be a multiple of where more than the element's (0: the element's)")
      .def_ro("note", &TensorDecl::note)
      .def("shape_text", &TensorDecl::shape_text, "'[T, 896]'")
      .def("shape_for", &TensorDecl::shape_for, "tokens"_a)
      .def("nbytes", &TensorDecl::bytes_for, "tokens"_a)
      .def("__repr__", [](const TensorDecl& d) {
        return fmt::format("<TensorDecl {} {} {} {}{}>", role_name(d.role), d.name, d.shape_text(), numpy_name(d.dtype),
                           d.optional ? " optional" : "");
      });

  nb::class_<PyOpSpec>(m, "OpSpec", "One validated op of a spec.")
      .def_prop_ro("name", [](const PyOpSpec& s) { return s.op->name; })
      .def_prop_ro("family", [](const PyOpSpec& s) { return std::string(s.op->family()); })
      .def_prop_ro("max_tokens", [](const PyOpSpec& s) { return s.op->max_tokens(); })
      .def_prop_ro("ranks", [](const PyOpSpec& s) { return s.op->ranks(); })
      .def("canonical_json", [](const PyOpSpec& s) { return s.op->canonical_json(); })
      .def("tensors", [](const PyOpSpec& s) { return s.op->tensors(); })
      .def("__repr__", [](const PyOpSpec& s) { return fmt::format("<OpSpec {} ({})>", s.op->name, s.op->family()); });

  nb::class_<Spec>(m, "Spec", "A spec file: a model's MoE layer or a single op.")
      .def_ro("file", &Spec::file)
      .def_ro("model", &Spec::model)
      .def_ro("archs", &Spec::archs)
      .def_prop_ro("ops", [](const Spec& s) {
        std::vector<PyOpSpec> ops;
        for (const auto& op : s.ops) ops.push_back({op});
        return ops;
      })
      .def("op", [](const Spec& s, std::string_view name) { return PyOpSpec{s.op(name)}; }, "name_or_index"_a)
      .def("canonical_json", &Spec::canonical_json)
      .def("__repr__", [](const Spec& s) { return fmt::format("<Spec {} ({} ops)>", s.file, s.ops.size()); });

  m.def("load_spec", [](const std::string& path) { return load_spec(path); }, "path"_a);
  m.def("parse_spec", [](std::string_view text, std::string_view file) { return parse_spec(text, file); }, "text"_a,
        "file"_a = "<string>");
  m.def("supported_archs", [] { return std::vector<std::string>(supported_archs().begin(), supported_archs().end()); });

  nb::class_<DeviceInfo>(m, "DeviceInfo")
      .def_ro("ordinal", &DeviceInfo::ordinal)
      .def_ro("name", &DeviceInfo::name)
      .def_ro("arch", &DeviceInfo::arch)
      .def_ro("sm_count", &DeviceInfo::sm_count)
      .def_ro("l2_bytes", &DeviceInfo::l2_bytes)
      .def_ro("max_shared_per_block", &DeviceInfo::max_shared_per_block)
      .def_ro("max_shared_per_sm", &DeviceInfo::max_shared_per_sm)
      .def_ro("hbm_peak_bytes_per_s", &DeviceInfo::hbm_peak_bytes_per_s)
      .def_prop_ro("cc", [](const DeviceInfo& d) { return nb::make_tuple(d.cc_major, d.cc_minor); });

  nb::class_<Context>(m, "Context")
      .def(
          "__init__",
          [](Context* self, int device, std::optional<std::string> cache_dir, std::optional<std::string> cuda_home,
             std::optional<unsigned> jobs, std::optional<bool> disk_cache, std::optional<bool> programmatic_launch) {
            auto options = options_of(std::move(cache_dir), std::move(cuda_home), jobs, disk_cache, programmatic_launch);
            nb::gil_scoped_release release;
            new (self) Context(std::move(options), device);
          },
          "device"_a = 0, "cache_dir"_a = nb::none(), "cuda_home"_a = nb::none(), "jobs"_a = nb::none(),
          "disk_cache"_a = nb::none(), "programmatic_launch"_a = nb::none())
      .def_prop_ro("device", &Context::device, nb::rv_policy::reference_internal)
      .def_prop_ro("cache_dir", [](const Context& c) { return c.options().cache_dir.string(); })
      .def_prop_ro("programmatic_launch", [](const Context& c) { return c.options().programmatic_launch; })
      .def("make_current", &Context::make_current)
      .def(
          "load",
          [](Context& c, const PyOpSpec& spec) {
            nb::gil_scoped_release release;
            return c.load(spec.op);
          },
          "op"_a, nb::keep_alive<0, 1>(), "Compiles (or reads from the cache) and loads the op; the GIL is released meanwhile.");

  nb::class_<Op>(m, "Op")
      .def_prop_ro("name", [](const Op& op) { return op.spec().name; })
      .def_prop_ro("family", [](const Op& op) { return std::string(op.spec().family()); })
      .def_prop_ro("max_tokens", [](const Op& op) { return op.spec().max_tokens(); })
      .def("tensors", [](const Op& op) { return op.tensors(); })
      .def("launch", &launch_raw, "buffers"_a, "tokens"_a, "stream"_a = 0, "expected_rows"_a = 0, "chained"_a = false,
           "Op::launch: one (address, bytes) pair per declared tensor ((0, 0) leaves an optional one unbound).")
      .def("_launch", &launch_checked, "ptrs"_a, "tokens"_a, "stream"_a, "expected_rows"_a)
      .def("_time_launches", &time_launches, "buffers"_a, "tokens"_a, "stream"_a, "calls"_a);

  nb::class_<RecordingOp, Op>(m, "_RecordingOp")
      .def("__init__", [](RecordingOp* self, const PyOpSpec& spec) { new (self) RecordingOp(spec.op); }, "op"_a)
      .def_prop_ro("last", [](const RecordingOp& op) {
        nb::dict d;
        d["tokens"] = op.last.tokens;
        d["buffers"] = op.last.buffers;
        d["stream"] = op.last.stream;
        d["expected_rows"] = op.last.expected_rows;
        d["count"] = op.last.count;
        return d;
      });

  bind_torch_fast_path(m);

  nb::class_<MoELayer, Op>(m, "MoELayer")
      .def(
          "__init__",
          [](MoELayer* self, Context& c, const PyOpSpec& router, const PyOpSpec& experts, std::optional<PyOpSpec> tail) {
            nb::gil_scoped_release release;
            new (self) MoELayer(c, router.op, experts.op, tail ? tail->op : nullptr);
          },
          "context"_a, "router"_a, "experts"_a, "tail"_a = nb::none(), nb::keep_alive<1, 2>());

  m.def("warmup", &warmup_specs, "paths"_a, "jobs"_a = nb::none(), "archs"_a = std::vector<std::string>{}, "cache_dir"_a = nb::none());
}
