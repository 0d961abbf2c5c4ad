// moejit cache ls | verify [--repair] | prune --max-size SIZE | explain SPEC | export FILE | import FILE | path
#include <moejit/error.hpp>

#include "cache/cache.hpp"
#include "cli.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace moejit::tools {

namespace {

struct Opts {
  std::string spec, op, arch, file, max_size;
  bool repair = false;
};

struct Env {
  Options options = Options::from_environment();
  detail::Compiler compiler{options.cuda_home};
  detail::Cache cache{options, compiler};
};

// NOTE: what a cache entry holds is shown escaped, as every message is: an imported manifest
// may carry control characters (a terminal's escape sequences).
std::string shown(std::string_view text) { return detail::printable(text, 2000); }

std::string summary(const std::string& contract_text) {
  try {
    const auto c = parse_contract_text(contract_text);
    std::vector<std::string> parts;
    for (const auto& f : c.fields()) parts.push_back(fmt::format("{}={}", f.name, f.value));
    return shown(fmt::format("{} {}", c.family(), fmt::join(parts, " ")));
  } catch (const Error&) {
    return fmt::format("(malformed contract: {})", shown(contract_text));
  }
}

int ls(Env& env) {
  const auto entries = env.cache.list();
  double total = 0;
  fmt::print("{:<32} {:<8} {:>9} {:>5}  {:<20}  {}\n", "key", "arch", "bytes", "regs", "created", "contract");
  for (const auto& e : entries) {
    total += static_cast<double>(e.bytes);
    if (!e.manifest) {
      fmt::print("{:<32} {:<8} {:>9} {:>5}  {:<20}  (unreadable manifest)\n", shown(e.key_hex), "?", e.bytes, "?", "?");
      continue;
    }
    int regs = 0;
    for (const auto& k : e.manifest->kernels) regs = std::max(regs, k.resources.registers);
    fmt::print("{:<32} {:<8} {:>9} {:>5}  {:<20}  {}\n", shown(e.key_hex), shown(e.manifest->inputs.arch), e.bytes, regs,
               shown(e.manifest->created), summary(e.manifest->inputs.contract_text));
  }
  fmt::print("{} entries, {} in {}\n", entries.size(), human_bytes(total), shown(env.cache.root().string()));
  return kOk;
}

int verify(Env& env, bool repair) {
  const auto bad = env.cache.verify(repair);
  std::size_t stuck = 0;
  std::string why;
  for (const auto& e : bad) {
    std::string note;
    if (repair && e.not_moved.empty()) note = " (moved aside)";
    if (repair && !e.not_moved.empty()) {
      note = fmt::format(" (not moved aside: {})", e.not_moved);
      why = e.not_moved;
      ++stuck;
    }
    fmt::print("bad {}: {}{}\n", shown(e.key_hex), shown(e.problem), note);
  }
  fmt::print("verify: {} entries, {} bad\n", env.cache.list().size() + (repair ? bad.size() - stuck : 0), bad.size());
  if (stuck > 0) {
    throw Error({.kind = ErrorKind::io, .message = fmt::format("could not move {} bad entr{} aside", stuck, stuck == 1 ? "y" : "ies"),
                 .file = env.cache.root().string(), .code = why});
  }
  return bad.empty() || repair ? kOk : kCheckFailed;  // --repair mended what it found
}

// An entry's contract family; empty when its contract text does not parse.
std::string contract_family(const std::string& contract_text) {
  try {
    return std::string(parse_contract_text(contract_text).family());
  } catch (const Error&) {
    return {};
  }
}

// The fields in which an entry's contract and toolchain differ from what a lookup wants.
std::vector<std::string> differences(const detail::KeyInputs& want, const detail::Manifest& have) {
  std::vector<std::string> diffs;
  const auto w = parse_contract_text(want.contract_text);
  const auto h = parse_contract_text(have.inputs.contract_text);
  auto field = [&](const std::string& name, std::string_view a, std::string_view b) {
    if (a != b) diffs.push_back(fmt::format("{}: wanted {}, entry has {}", name, a.empty() ? "(none)" : a, b.empty() ? "(none)" : b));
  };
  field("arch", w.arch(), h.arch());
  field("template", w.template_name(), h.template_name());
  for (const auto& f : w.fields()) field(f.name, f.value, h.get(f.name));
  for (const auto& f : h.fields()) {
    if (w.get(f.name).empty()) field(f.name, "", f.value);
  }
  field("template closure hash", want.template_hash, have.inputs.template_hash);
  field("NVRTC version", want.nvrtc_version, have.inputs.nvrtc_version);
  field("options", fmt::format("{}", fmt::join(want.options, " ")), fmt::format("{}", fmt::join(have.inputs.options, " ")));
  return diffs;
}

int explain(Env& env, const Opts& o) {
  const Spec spec = load_spec(o.spec);
  const auto entries = env.cache.list();
  for (const auto& op : select_ops(spec, o.op)) {
    for (const auto& arch : o.arch.empty() ? spec.archs : std::vector<std::string>{o.arch}) {
      for (const auto& c : contracts(*op, arch)) {
        const auto want = env.cache.inputs_of(c);
        const auto key = detail::make_key(want);
        if (std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.key_hex == key.hex(); })) {
          fmt::print("hit  {} {}: {}\n", shown(op->name), arch, key.hex());
          continue;
        }
        fmt::print("miss {} {}: {}\n", shown(op->name), arch, key.hex());
        std::vector<std::pair<std::vector<std::string>, std::string>> near;
        for (const auto& e : entries) {
          if (!e.manifest || contract_family(e.manifest->inputs.contract_text) != c.family()) continue;
          near.emplace_back(differences(want, *e.manifest), shown(e.key_hex));
        }
        std::sort(near.begin(), near.end(), [](const auto& a, const auto& b) { return a.first.size() < b.first.size(); });
        if (near.empty()) fmt::print("  no cached entry of family {}\n", c.family());
        for (std::size_t i = 0; i < std::min<std::size_t>(3, near.size()); ++i) {
          fmt::print("  nearest {} differs in {} field{}:\n", near[i].second, near[i].first.size(), near[i].first.size() == 1 ? "" : "s");
          for (const auto& d : near[i].first) fmt::print("    {}\n", shown(d));
        }
      }
    }
  }
  return kOk;
}

}  // namespace

Action add_cache(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("cache", "Inspect and maintain the kernel cache ($MOEJIT_CACHE_DIR, else $XDG_CACHE_HOME/moejit, else ~/.cache/moejit)");
  sub->require_subcommand(1);
  auto* ls_cmd = sub->add_subcommand("ls", "List the cached kernels");
  auto* verify_cmd = sub->add_subcommand("verify", "Check every entry's checksum and key");
  verify_cmd->add_flag("--repair", o->repair, "move bad entries aside (they are recompiled when next needed)");
  auto* prune_cmd = sub->add_subcommand("prune", "Remove least recently used entries down to a size");
  prune_cmd
      ->add_option("--max-size", o->max_size,
                   "size to keep: bytes, or a number (up to 9 decimals) with a unit K, KB, M, MB, G, GB (powers of 1000) "
                   "or KiB, MiB, GiB (powers of 1024), e.g. 500M, 2G, 1.5GiB")
      ->required()
      ->check(size_value());
  auto* explain_cmd = sub->add_subcommand("explain", "Say, per contract of a spec, whether it is cached and how it differs from the nearest entries");
  explain_cmd->add_option("spec", o->spec, "spec file")->required();
  explain_cmd->add_option("--op", o->op, "only this op");
  explain_cmd->add_option("--arch", o->arch, "target arch (default: the spec's archs)")->check(supported_arch());
  auto* export_cmd = sub->add_subcommand("export", "Write every valid entry into one bundle file");
  export_cmd
      ->add_option("file", o->file,
                   "bundle file to write: a new file or a regular one to replace (a directory, device, FIFO, socket or "
                   "symbolic link is refused)")
      ->required();
  auto* import_cmd = sub->add_subcommand("import", "Verify a bundle and add its entries to this cache");
  import_cmd->add_option("file", o->file, "bundle file to read")->required();
  auto* path_cmd = sub->add_subcommand("path", "Print the cache directory");
  return [=] {
    Env env;
    if (ls_cmd->parsed()) return ls(env);
    if (verify_cmd->parsed()) return verify(env, o->repair);
    if (prune_cmd->parsed()) {
      const auto r = env.cache.prune(parse_size(o->max_size));
      fmt::print("prune: removed {} entries, freed {}, kept {}\n", r.removed, human_bytes(static_cast<double>(r.freed_bytes)),
                 human_bytes(static_cast<double>(r.kept_bytes)));
      return kOk;
    }
    if (explain_cmd->parsed()) return explain(env, *o);
    if (export_cmd->parsed()) {
      fmt::print("exported {} entries to {}\n", env.cache.export_bundle(o->file), o->file);
      return kOk;
    }
    if (import_cmd->parsed()) {
      const auto r = env.cache.import_bundle(o->file);
      fmt::print("imported {} entries ({} already present) into {}\n", r.imported, r.present, env.cache.root().string());
      return kOk;
    }
    if (path_cmd->parsed()) fmt::print("{}\n", env.cache.root().string());  // as it is: scripts use it
    return kOk;
  };
}

}  // namespace moejit::tools
