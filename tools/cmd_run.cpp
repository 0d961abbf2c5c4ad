// moejit run SPEC --op NAME|INDEX --in NAME=FILE.npy ... --out-dir DIR [--tokens T] [--repeat N]
//            [--init NAME=FILE.npy ...] [--describe] [--device N]
// Replays one op on captured tensors: every input is checked against the op's declaration
// before anything touches the GPU; outputs are written as DIR/<name>.npy.
#include <moejit/context.hpp>
#include <moejit/error.hpp>
#include <moejit/op.hpp>

#include "cache/fs.hpp"
#include "cli.hpp"
#include "npy.hpp"
#include "op_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>

namespace moejit::tools {

namespace {

struct Opts {
  std::string spec, op, out_dir;
  std::vector<std::string> in, init;
  std::int64_t tokens = -1;
  int repeat = 1, device = 0;
  bool describe = false;
  bool reference = false;
};

std::string dtype_text(DType t) {
  return t == DType::bf16 ? "bfloat16 (.npy: uint16 raw bits)" : std::string(numpy_name(t));
}

int describe(const Spec& spec, const OpSpec& op) {
  fmt::print("op {} ({}) of {}; T is the token count, given at run time\n", op.name, op.family(), spec.file);
  for (auto role : {TensorRole::input, TensorRole::output}) {
    fmt::print("{}:\n", role == TensorRole::input ? "inputs" : "outputs");
    for (const auto& t : op.tensors()) {
      if (t.role != role) continue;
      std::string extra = t.optional ? " (optional)" : "";
      if (!t.note.empty()) extra += "  -- " + t.note;
      fmt::print("  {:<20} {:<18} {}{}\n", t.name, t.shape_text(), dtype_text(t.dtype), extra);
    }
  }
  fmt::print("bfloat16 tensors travel as uint16 arrays holding the raw bf16 bits (NumPy has no bfloat16).\n");
  return kOk;
}

[[noreturn]] void bad(std::string message, std::string file, std::string name, std::string found, std::string expected) {
  throw Error({.kind = ErrorKind::input, .message = std::move(message), .file = std::move(file), .pointer = std::move(name),
               .found = std::move(found), .expected = std::move(expected)});
}

// "NAME=FILE" pairs, each name known to the op and given once, with the right role.
std::map<std::string, std::string> bindings(const OpSpec& op, const std::vector<std::string>& pairs, TensorRole role) {
  std::map<std::string, std::string> out;
  const auto decls = op.tensors();
  for (const auto& p : pairs) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == p.size()) {
      bad("a binding must be NAME=FILE.npy", "", "", p, "NAME=FILE.npy");
    }
    const auto name = p.substr(0, eq);
    auto it = std::find_if(decls.begin(), decls.end(), [&](const auto& d) { return d.name == name; });
    std::vector<std::string> names;
    for (const auto& d : decls) {
      if (d.role == role) names.push_back(d.name);
    }
    if (it == decls.end() || it->role != role) {
      bad(fmt::format("op '{}' has no {} named '{}'", op.name, role == TensorRole::input ? "input" : "output", name), "",
          name, name, fmt::format("one of {}{}", fmt::join(names, ", "), role == TensorRole::output ? " (outputs take --init)" : ""));
    }
    if (!out.emplace(name, p.substr(eq + 1)).second) bad("tensor given twice", "", name, p, "each tensor once");
  }
  return out;
}

// The token count a tensor's shape implies (or -1 when its shape has no T).
std::int64_t tokens_of(const TensorDecl& d, const NpyArray& a) {
  for (std::size_t i = 0; i < d.shape.size() && i < a.shape.size(); ++i) {
    if (d.shape[i].tokens) return a.shape[i];
  }
  return -1;
}

void check_array(const TensorDecl& d, const NpyArray& a, const std::string& file, std::int64_t tokens) {
  if (a.type != npy_type_for(d.dtype)) {
    bad(fmt::format("tensor '{}' has the wrong dtype", d.name), file, d.name, std::string(npy_type_name(a.type)),
        std::string(npy_type_name(npy_type_for(d.dtype))) + (d.dtype == DType::bf16 ? " (raw bfloat16 bits)" : ""));
  }
  const auto want = d.shape_for(tokens);
  if (a.shape != want) {
    bad(fmt::format("tensor '{}' has the wrong shape for T = {}", d.name, tokens), file, d.name,
        fmt::format("({})", fmt::join(a.shape, ", ")), fmt::format("({}) = {}", fmt::join(want, ", "), d.shape_text()));
  }
}

std::filesystem::path output_path(const std::string& dir, const TensorDecl& decl) {
  return std::filesystem::path(dir) / (decl.name + ".npy");
}

// Before the op runs: an output path that could not end as a regular file costs no run.
void check_outputs(const std::string& dir, const std::vector<TensorDecl>& decls) {
  detail::make_output_dir(dir, "--out-dir");
  for (const auto& d : decls) {
    if (d.role == TensorRole::output) detail::check_output_file(output_path(dir, d), "--out-dir");
  }
}

// Every output, published together: all written or none.
void write_outputs(const std::string& dir, const std::vector<TensorDecl>& decls, const std::vector<reference::HostTensor>& host) {
  detail::OutputFiles files("--out-dir");
  for (std::size_t i = 0; i < decls.size(); ++i) {
    if (decls[i].role != TensorRole::output) continue;
    NpyArray a{npy_type_for(decls[i].dtype), host[i].shape,
               std::string(reinterpret_cast<const char*>(host[i].data.data()), host[i].bytes())};
    files.add(output_path(dir, decls[i]), format_npy(a));
  }
  files.publish();
  for (std::size_t i = 0; i < decls.size(); ++i) {
    if (decls[i].role != TensorRole::output) continue;
    fmt::print("wrote {} ({}) {}\n", output_path(dir, decls[i]).string(), fmt::join(host[i].shape, ", "), dtype_text(decls[i].dtype));
  }
}

// The tensors given on the command line: their files and their arrays, by name.
struct Given {
  std::map<std::string, std::string> ins, inits;
  std::map<std::string, NpyArray> arrays;

  const std::string& file(const TensorDecl& d) const { return d.role == TensorRole::input ? ins.at(d.name) : inits.at(d.name); }
};

Given read_given(const OpSpec& op, const Opts& o) {
  Given g{bindings(op, o.in, TensorRole::input), bindings(op, o.init, TensorRole::output), {}};
  for (const auto& [name, file] : g.ins) g.arrays.emplace(name, read_npy(file, name));
  for (const auto& [name, file] : g.inits) g.arrays.emplace(name, read_npy(file, name));
  for (const auto& d : op.tensors()) {
    if (d.role == TensorRole::input && !d.optional && !g.arrays.count(d.name)) {
      bad(fmt::format("missing input '{}'", d.name), "", d.name, "nothing",
          fmt::format("--in {}=FILE.npy holding {} {}", d.name, d.shape_text(), dtype_text(d.dtype)));
    }
  }
  return g;
}

struct TokenCount {
  std::int64_t tokens = -1;
  std::string from;  ///< what gave it: --tokens or a tensor's name
};

// --tokens, else the first given tensor with a T dimension.
TokenCount token_count(const OpSpec& op, const Given& g, std::int64_t tokens_option) {
  TokenCount tc{tokens_option, "--tokens"};
  for (const auto& d : op.tensors()) {
    auto it = g.arrays.find(d.name);
    if (tc.tokens >= 0 || it == g.arrays.end()) continue;
    tc = {tokens_of(d, it->second), d.name};
    const bool has_t = std::any_of(d.shape.begin(), d.shape.end(), [](const auto& dim) { return dim.tokens; });
    if (tc.tokens < 0 && has_t) {  // too few dimensions to hold T: a scalar for [T, 2d]
      bad(fmt::format("tensor '{}' has too few dimensions", d.name), g.file(d), d.name,
          fmt::format("({})", fmt::join(it->second.shape, ", ")), d.shape_text());
    }
  }
  if (tc.tokens < 0) bad("cannot tell the token count", "", "", "no input with a T dimension", "--tokens T");
  check_token_limit(op, tc.tokens, tc.from);
  return tc;
}

// One host tensor per declaration: the given arrays, checked against it, and zeros for the rest.
std::vector<reference::HostTensor> host_tensors(const OpSpec& op, const Given& g, const TokenCount& tc) {
  std::vector<reference::HostTensor> host;
  for (const auto& d : op.tensors()) {
    auto it = g.arrays.find(d.name);
    if (it == g.arrays.end()) {
      host.push_back(reference::HostTensor::like(d, tc.tokens));  // outputs start as zeros
      continue;
    }
    const auto t = tokens_of(d, it->second);
    if (t >= 0 && t != tc.tokens) {
      bad(fmt::format("token count mismatch: {} gives T = {}", tc.from, tc.tokens), g.file(d), d.name, fmt::format("T = {}", t),
          fmt::format("T = {}", tc.tokens));
    }
    check_array(d, it->second, g.file(d), tc.tokens);
    auto h = reference::HostTensor::like(d, tc.tokens);
    std::memcpy(h.data.data(), it->second.data.data(), h.bytes());
    host.push_back(std::move(h));
  }
  return host;
}

// Runs the op `o.repeat` times on the GPU, each from the same outputs, leaving the last run's
// outputs in `host`; returns each run's time in microseconds. Optional inputs not given
// (`given[i]` false) are bound as null.
std::vector<double> run_on_gpu(const Spec& spec, const OpSpec& op, const Opts& o, std::vector<reference::HostTensor>& host,
                               const std::vector<bool>& given, std::int64_t tokens) {
  const auto decls = op.tensors();
  Context context(Options::from_environment(), o.device);
  std::shared_ptr<const OpSpec> chosen;
  for (const auto& s : spec.ops) {
    if (s.get() == &op) chosen = s;
  }
  const auto loaded = context.load(chosen);
  auto device = upload(context.driver(), host);
  for (std::size_t i = 0; i < decls.size(); ++i) {
    if (!given[i]) device.bindings[i] = {};
  }
  detail::Stream stream(context.driver());
  std::vector<double> us;
  for (int r = 0; r < o.repeat; ++r) {
    if (r > 0) {
      for (std::size_t i = 0; i < decls.size(); ++i) {
        if (decls[i].role == TensorRole::output) device.buffers[i].upload(host[i].data.data(), host[i].bytes());
      }
    }
    detail::Event start(context.driver()), stop(context.driver());
    start.record(stream.get());
    loaded->launch(device.bindings, tokens, stream.get());
    stop.record(stream.get());
    us.push_back(1000.0 * stop.since(start));
  }
  download_outputs(*loaded, device, host);
  return us;
}

}  // namespace

Action add_run(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("run", "Run one op of a spec on tensors from .npy files and save its outputs");
  sub->add_option("spec", o->spec, "spec file")->required();
  sub->add_option("--op", o->op, "the op (name or index)")->required();
  sub->add_flag("--describe", o->describe, "list the op's inputs and outputs and exit");
  sub->add_option("--in", o->in, "an input: NAME=FILE.npy (repeatable)");
  sub->add_option("--init", o->init, "an output's initial contents: NAME=FILE.npy (repeatable)");
  sub->add_option("--out-dir", o->out_dir, "directory for the outputs (<name>.npy)");
  sub->add_option("--tokens", o->tokens, fmt::format("token count, 0 to {} (default: from the inputs' shapes)", kMaxTokens))
      ->check(integer_in(0, kMaxTokens));
  sub->add_option("--repeat", o->repeat, "run N times (1 to 100000) and print the median time per call")
      ->check(integer_in(1, 100000));
  sub->add_option("--device", o->device, "GPU ordinal")->check(integer_in(0, std::numeric_limits<int>::max()));
  sub->add_flag("--reference", o->reference, "compute the outputs with the CPU reference instead (no GPU needed)");
  return [o] {
    const Spec spec = load_spec(o->spec);
    const OpSpec& op = *spec.op(o->op);
    if (o->describe) return describe(spec, op);
    if (o->out_dir.empty()) bad("--out-dir is required to run", "", "", "", "--out-dir DIR");
    if (op.ranks() > 1) {
      throw Error({.kind = ErrorKind::usage, .message = fmt::format("op '{}' spans {} GPUs; run drives one", op.name, op.ranks()),
                   .expected = "an op with tp_size 1"});
    }
    const auto decls = op.tensors();
    const Given given = read_given(op, *o);
    const TokenCount tc = token_count(op, given, o->tokens);
    auto host = host_tensors(op, given, tc);
    check_outputs(o->out_dir, decls);

    if (o->reference) {
      reference::harness_for(op.family()).run(op, host, tc.tokens);
      write_outputs(o->out_dir, decls, host);
      fmt::print("ran {} ({}) T={} on the CPU reference\n", op.name, op.family(), tc.tokens);
      return kOk;
    }
    // Every input checked: now the GPU.
    std::vector<bool> bound;
    for (const auto& d : decls) bound.push_back(d.role == TensorRole::output || given.arrays.count(d.name));
    auto us = run_on_gpu(spec, op, *o, host, bound, tc.tokens);
    write_outputs(o->out_dir, decls, host);
    std::sort(us.begin(), us.end());
    fmt::print("ran {} ({}) T={} {} time{}: median {:.2f} us per call\n", op.name, op.family(), tc.tokens, o->repeat,
               o->repeat == 1 ? "" : "s", us[us.size() / 2]);
    return kOk;
  };
}

}  // namespace moejit::tools
