// moejit warmup SPEC...|DIR [--jobs N] [--arch ARCH]...
// Compiles every contract of the specs on a thread pool (each key once), then times a warm
// start of each spec from the disk cache.
#include <moejit/error.hpp>
#include <moejit/warmup.hpp>

#include "cache/cache.hpp"
#include "cli.hpp"

#include <fmt/format.h>

#include <chrono>
#include <set>

namespace moejit::tools {

namespace {

struct Opts {
  std::vector<std::string> specs;
  std::vector<std::string> archs;
  unsigned jobs = 0;
  bool quiet = false;
};

void print_table(const WarmupReport& report) {
  fmt::print("{:<44} {:<8} {:<9} {:>7} {:>5} {:>6}  {}\n", "spec op", "arch", "source", "time", "regs", "spill", "key");
  for (const auto& e : report.entries) {
    const auto label = e.labels.size() > 1 ? fmt::format("{} (+{})", e.labels.front(), e.labels.size() - 1) : e.labels.front();
    fmt::print("{:<44} {:<8} {:<9} {:>6.2f}s {:>5} {:>6}  {}\n", label, e.arch, e.source == "failed" ? "FAILED" : e.source,
               e.seconds, e.registers, e.spill_bytes, e.key);
  }
}

}  // namespace

Action add_warmup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("warmup", "Compile every kernel of the specs into the cache, in parallel");
  sub->add_option("specs", o->specs, "spec files or directories (e.g. specs/)")->required();
  sub->add_option("--arch", o->archs, "target arch; repeatable (default: each spec's archs)")->check(supported_arch());
  sub->add_option("-j,--jobs", o->jobs, fmt::format("compile threads, 1 to {} (default: $MOEJIT_JOBS or all cores)", kMaxJobs))
      ->check(integer_in(1, kMaxJobs));
  sub->add_flag("-q,--quiet", o->quiet, "print the summary only");
  return [o] {
    const auto specs = load_specs(o->specs);
    auto options = Options::from_environment();
    if (o->jobs) options.jobs = o->jobs;

    const bool tty = stderr_is_terminal() && !o->quiet;
    const auto report = warmup(specs, options, o->archs, [&](const WarmupEntry& e, std::size_t done, std::size_t total) {
      if (tty) fmt::print(stderr, "\r\033[K[{}/{}] {} {} {}", done, total, e.source, e.arch, e.labels.front());
    });
    if (tty) fmt::print(stderr, "\r\033[K");

    if (!o->quiet) print_table(report);
    std::size_t bad_input = 0;
    for (const auto& e : report.entries) {
      if (e.source != "failed") continue;
      fmt::print(stderr, "moejit: warmup of {} failed: {}\n", e.labels.front(), e.error);
      if (e.bad_input) ++bad_input;
    }
    const auto failed = report.count("failed");
    fmt::print("warmup: {} contracts from {} spec{} ({} jobs): {} compiled, {} from disk, {} waited for another process, "
               "{} in memory, {} failed; {:.2f} s on {} thread{}\n",
               report.entries.size(), specs.size(), specs.size() == 1 ? "" : "s", report.jobs, report.count("compiled"),
               report.count("disk"), report.count("waited"), report.count("memory"), failed, report.seconds, report.threads,
               report.threads == 1 ? "" : "s");
    fmt::print("cache: {}\n", report.cache);
    if (failed) return bad_input == failed ? kBadInput : kFailure;  // 2 only when every failure is the user's

    // Warm start: a fresh process's view, everything read back from disk and verified.
    const detail::Compiler compiler(options.cuda_home);
    for (const auto& spec : specs) {
      const auto t_open = std::chrono::steady_clock::now();
      detail::Cache fresh(options, compiler);
      const auto t0 = std::chrono::steady_clock::now();
      const auto spec_contracts = warmup_contracts(load_spec(spec.file), o->archs);
      for (const auto& c : spec_contracts) fresh.get(c);
      const auto ms = [](auto from, auto to) { return std::chrono::duration<double, std::milli>(to - from).count(); };
      std::set<std::string> unique;
      for (const auto& c : spec_contracts) unique.insert(c.text());
      fmt::print("warm start: {:<36} {:>6.1f} ms ({} contracts, parse + keys + read + verify; opening the cache {:.1f} ms more)\n",
                 spec.file, ms(t0, std::chrono::steady_clock::now()), unique.size(), ms(t_open, t0));
    }
    return kOk;
  };
}

}  // namespace moejit::tools
