// moejit compile SPEC [--op NAME] [--arch ARCH] [--emit report|source|ptx|sass|cubin|contract] [-o PATH]
#include <moejit/error.hpp>

#include "cache/cache.hpp"
#include "cache/fs.hpp"
#include "cli.hpp"
#include "compiler/disasm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <span>

namespace moejit::tools {

namespace {

struct Opts {
  std::string spec;
  std::string op;
  std::string arch;
  std::string emit = "report";
  std::string output;
};

struct Item {
  std::string op;
  Contract contract;
};

// Several contracts go to a directory (one file each: OP.ARCH.EXT, or OP.FAMILY.ARCH.EXT where
// the op compiles to several contracts, as the experts op's decode and prefill kernels), one
// contract to the file named by -o.
std::string output_path(const Opts& o, std::span<const Item> items, std::size_t i, std::string_view ext) {
  std::error_code ec;
  if (items.size() == 1 && !std::filesystem::is_directory(o.output, ec)) return o.output;
  detail::make_output_dir(o.output, "-o");
  const Item& item = items[i];
  const auto same = std::count_if(items.begin(), items.end(), [&](const Item& other) {
    return other.op == item.op && other.contract.arch() == item.contract.arch();
  });
  const std::string name = same > 1 ? fmt::format("{}.{}.{}.{}", item.op, item.contract.family(), item.contract.arch(), ext)
                                    : fmt::format("{}.{}.{}", item.op, item.contract.arch(), ext);
  return (std::filesystem::path(o.output) / name).string();
}

// The dynamic shared memory the launcher asks for a kernel: bytes, or "load" where the device's
// limits decide it when the op is loaded.
std::string dynamic_shared(const Contract& contract, const std::string& expression) {
  for (const auto& k : contract.kernels) {
    if (k.expression != expression) continue;
    return k.dynamic_shared == Contract::kSharedAtLoad ? "load" : std::to_string(k.dynamic_shared);
  }
  return "?";
}

int emit_report(detail::Cache& cache, const std::vector<Item>& items) {
  fmt::print("{:<20} {:<8} {:<9} {:>5} {:>6} {:>6} {:>6} {:>6}  {:<32}  {}\n", "op", "arch", "source", "regs", "smem",
             "+dyn", "stack", "spill", "key", "kernel");
  for (const auto& item : items) {
    auto r = cache.get(item.contract);
    for (const auto& k : r.entry->manifest.kernels) {
      const auto& res = k.resources;
      fmt::print("{:<20} {:<8} {:<9} {:>5} {:>6} {:>6} {:>6} {:>6}  {:<32}  {}\n", item.op, item.contract.arch(),
                 detail::to_string(r.source), res.registers, res.shared_bytes, dynamic_shared(item.contract, k.name_expression),
                 res.stack_bytes, res.spill_store_bytes + res.spill_load_bytes, r.entry->manifest.key.hex(), k.name_expression);
      if (res.wgmma_serialized) {
        fmt::print("{:<20} {:<8} warning: ptxas serialized the wgmmas of {} (C7518: the tensor pipe drains between them)\n",
                   item.op, item.contract.arch(), k.name_expression);
      }
    }
    // The contract's fields under its kernels: the shape and the tiling it chose.
    std::vector<std::string> fields;
    for (const auto& f : item.contract.fields()) fields.push_back(fmt::format("{}={}", f.name, f.value));
    fmt::print("{:<20} {:<8} contract {}: {}\n", item.op, item.contract.arch(), item.contract.family(), fmt::join(fields, " "));
  }
  return kOk;
}

}  // namespace

Action add_compile(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("compile", "Instantiate and compile a spec's kernels, and show what came out");
  sub->add_option("spec", o->spec, "spec file")->required();
  sub->add_option("--op", o->op, "only these ops (names or indices, comma-separated)");
  sub->add_option("--arch", o->arch, "target arch (default: the spec's archs)")->check(supported_arch());
  sub->add_option("--emit", o->emit, "what to show: report (registers, static and dynamic shared memory, spills; each contract's fields and tiling), source, ptx, sass (the toolkit's nvdisasm on the cubin), cubin, contract")
      ->check(CLI::IsMember({"report", "source", "ptx", "sass", "cubin", "contract"}));
  sub->add_option("-o,--output", o->output, "write to this file (a directory when there are several contracts)");
  return [o] {
    const Spec spec = load_spec(o->spec);
    const auto archs = o->arch.empty() ? spec.archs : std::vector<std::string>{o->arch};
    std::vector<Item> items;
    for (const auto& op : select_ops(spec, o->op)) {
      for (const auto& arch : archs) {
        for (auto& c : contracts(*op, arch)) items.push_back({op->name, std::move(c)});
      }
    }
    const auto options = Options::from_environment();
    if (o->emit == "sass") detail::find_nvdisasm(options.cuda_home);  // before the cache is opened or anything compiled
    detail::Compiler compiler(options.cuda_home);
    detail::Cache cache(options, compiler);
    if (o->emit == "report") return emit_report(cache, items);
    if (o->emit == "cubin" && o->output.empty()) {
      throw Error({.kind = ErrorKind::usage, .message = "--emit cubin writes binary files", .expected = "-o FILE or -o DIR"});
    }
    // Every file checked before anything is compiled, and all published together: a full disk
    // or a bad path leaves none of the set.
    std::vector<std::string> paths;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (o->output.empty()) break;
      paths.push_back(output_path(*o, items, i, o->emit == "source" ? "cu" : o->emit));
      detail::check_output_file(paths.back(), "-o");
    }
    detail::OutputFiles files("-o");
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& item = items[i];
      std::string text;
      if (o->emit == "source") {
        text = item.contract.source;
      } else if (o->emit == "contract") {
        text = item.contract.text();
      } else if (o->emit == "ptx") {
        text = compiler.compile(item.contract, detail::Emit::ptx).binary;
      } else if (o->emit == "sass") {
        text = detail::disassemble(options.cuda_home, cache.get(item.contract).entry->cubin.view());
      } else {
        text = cache.get(item.contract).entry->cubin.view();
      }
      if (paths.empty()) {
        fmt::print("// ---- op {} arch {} key {}\n{}\n", item.op, item.contract.arch(), cache.key_of(item.contract).hex(), text);
      } else {
        files.add(paths[i], text);
      }
    }
    files.publish();
    for (std::size_t i = 0; i < paths.size(); ++i) {
      fmt::print(stderr, "wrote {} ({} {})\n", paths[i], items[i].op, items[i].contract.arch());
    }
    return kOk;
  };
}

}  // namespace moejit::tools
