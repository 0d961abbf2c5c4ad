// moejit warmup SPEC...|DIR [--jobs N] [--arch ARCH]...
// Compiles every contract of the specs on a thread pool (each key once), then times a warm
// start of each spec from the disk cache.
#include <moejit/error.hpp>

#include "cache/warmup.hpp"
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

std::vector<detail::WarmupJob> jobs_of(const Spec& spec, const std::vector<std::string>& archs) {
  std::vector<detail::WarmupJob> jobs;
  for (const auto& op : spec.ops) {
    for (const auto& arch : archs.empty() ? spec.archs : archs) {
      for (auto& c : contracts(*op, arch)) jobs.push_back({fmt::format("{} {}", spec.file, op->name), std::move(c)});
    }
  }
  return jobs;
}

void print_table(const std::vector<detail::WarmupOutcome>& outcomes) {
  fmt::print("{:<44} {:<8} {:<9} {:>7} {:>5} {:>6}  {}\n", "spec op", "arch", "source", "time", "regs", "spill", "key");
  for (const auto& o : outcomes) {
    int regs = 0, spill = 0;
    if (o.entry) {
      for (const auto& k : o.entry->manifest.kernels) {
        regs = std::max(regs, k.resources.registers);
        spill += k.resources.spill_store_bytes + k.resources.spill_load_bytes + k.resources.stack_bytes;
      }
    }
    const auto label = o.labels.size() > 1 ? fmt::format("{} (+{})", o.labels.front(), o.labels.size() - 1) : o.labels.front();
    fmt::print("{:<44} {:<8} {:<9} {:>6.2f}s {:>5} {:>6}  {}\n", label, o.contract->arch(),
               o.error.empty() ? detail::to_string(o.source) : "FAILED", o.seconds, regs, spill, o.key.hex());
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
    std::vector<detail::WarmupJob> jobs;
    for (const auto& spec : specs) {
      for (auto& j : jobs_of(spec, o->archs)) jobs.push_back(std::move(j));
    }
    const auto options = Options::from_environment();
    const unsigned threads = o->jobs ? o->jobs : options.jobs;
    detail::Compiler compiler(options.cuda_home);
    detail::Cache cache(options, compiler);

    const bool tty = stderr_is_terminal() && !o->quiet;
    const auto start = std::chrono::steady_clock::now();
    auto outcomes = detail::warmup(cache, jobs, threads, [&](const detail::WarmupOutcome& d, std::size_t done, std::size_t total) {
      if (tty) fmt::print(stderr, "\r\033[K[{}/{}] {} {} {}", done, total, detail::to_string(d.source), d.contract->arch(), d.labels.front());
    });
    if (tty) fmt::print(stderr, "\r\033[K");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const unsigned used = detail::warmup_threads(threads, outcomes.size());

    std::size_t count[4] = {}, failed = 0, bad_input = 0;
    for (const auto& x : outcomes) {
      if (x.error.empty()) {
        ++count[static_cast<int>(x.source)];
      } else {
        ++failed;
        if (x.bad_input) ++bad_input;
      }
    }
    if (!o->quiet) print_table(outcomes);
    for (const auto& x : outcomes) {
      if (!x.error.empty()) fmt::print(stderr, "moejit: warmup of {} failed: {}\n", x.labels.front(), x.error);
    }
    fmt::print("warmup: {} contracts from {} spec{} ({} jobs): {} compiled, {} from disk, {} waited for another process, "
               "{} in memory, {} failed; {:.2f} s on {} thread{}\n",
               outcomes.size(), specs.size(), specs.size() == 1 ? "" : "s", jobs.size(), count[3], count[1], count[2],
               count[0], failed, seconds, used, used == 1 ? "" : "s");
    fmt::print("cache: {}\n", cache.root().string());
    if (failed) return bad_input == failed ? kBadInput : kFailure;  // 2 only when every failure is the user's

    // Warm start: a fresh process's view, everything read back from disk and verified.
    for (const auto& spec : specs) {
      const auto t_open = std::chrono::steady_clock::now();
      detail::Cache fresh(options, compiler);
      const auto t0 = std::chrono::steady_clock::now();
      const auto spec_jobs = jobs_of(load_spec(spec.file), o->archs);
      for (const auto& j : spec_jobs) fresh.get(j.contract);
      const auto ms = [](auto from, auto to) { return std::chrono::duration<double, std::milli>(to - from).count(); };
      std::set<std::string> unique;
      for (const auto& j : spec_jobs) unique.insert(j.contract.text());
      fmt::print("warm start: {:<36} {:>6.1f} ms ({} contracts, parse + keys + read + verify; opening the cache {:.1f} ms more)\n",
                 spec.file, ms(t0, std::chrono::steady_clock::now()), unique.size(), ms(t_open, t0));
    }
    return kOk;
  };
}

}  // namespace moejit::tools
