#include "warmup.hpp"

#include <moejit/error.hpp>
#include <moejit/warmup.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace moejit::detail {

std::vector<WarmupOutcome> warmup(Cache& cache, std::span<const WarmupJob> jobs, unsigned threads,
                                  const WarmupProgress& progress) {
  std::vector<WarmupOutcome> outcomes;
  for (const auto& job : jobs) {
    const auto key = cache.key_of(job.contract);
    auto it = std::find_if(outcomes.begin(), outcomes.end(), [&](const auto& o) { return o.key == key; });
    if (it == outcomes.end()) {
      outcomes.push_back({.key = key, .labels = {job.label}, .contract = &job.contract});
    } else {
      it->labels.push_back(job.label);
    }
  }

  cache.reclaim_staging();

  std::atomic<std::size_t> next{0};
  std::size_t finished = 0;
  std::mutex progress_mutex;
  auto worker = [&] {
    for (std::size_t i = next++; i < outcomes.size(); i = next++) {
      auto& o = outcomes[i];
      const auto start = std::chrono::steady_clock::now();
      try {
        auto r = cache.get(*o.contract);
        o.entry = std::move(r.entry);
        o.source = r.source;
      } catch (const Error& e) {
        o.error = e.what();
        o.bad_input = e.is_bad_input();
      } catch (const std::exception& e) {
        o.error = e.what();
      }
      o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::lock_guard lock(progress_mutex);
      ++finished;
      if (progress) progress(o, finished, outcomes.size());
    }
  };
  const unsigned n = warmup_threads(threads, outcomes.size());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return outcomes;
}

unsigned warmup_threads(unsigned threads, std::size_t keys) noexcept {
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(threads, keys)));
}

}  // namespace moejit::detail

namespace moejit {

namespace {

WarmupEntry entry_of(const detail::WarmupOutcome& o) {
  WarmupEntry e{.labels = o.labels,
                .arch = o.contract->arch(),
                .source = o.error.empty() ? std::string(detail::to_string(o.source)) : "failed",
                .seconds = o.seconds,
                .key = o.key.hex(),
                .error = o.error,
                .bad_input = o.bad_input};
  if (o.entry) {
    for (const auto& k : o.entry->manifest.kernels) {
      e.registers = std::max(e.registers, k.resources.registers);
      e.spill_bytes += k.resources.spill_store_bytes + k.resources.spill_load_bytes + k.resources.stack_bytes;
    }
  }
  return e;
}

// f(op, contract) for each contract a warmup of `spec` compiles, in warmup_contracts' order.
template <class F>
void each_contract(const Spec& spec, std::span<const std::string> archs, F&& f) {
  for (const auto& op : spec.ops) {
    for (const auto& arch : archs.empty() ? std::span<const std::string>(spec.archs) : archs) {
      for (auto& c : contracts(*op, arch)) f(*op, std::move(c));
    }
  }
}

}  // namespace

std::vector<Contract> warmup_contracts(const Spec& spec, std::span<const std::string> archs) {
  std::vector<Contract> all;
  each_contract(spec, archs, [&](const OpSpec&, Contract c) { all.push_back(std::move(c)); });
  return all;
}

std::size_t WarmupReport::count(std::string_view source) const noexcept {
  return static_cast<std::size_t>(std::ranges::count_if(entries, [&](const WarmupEntry& e) { return e.source == source; }));
}

WarmupReport warmup(std::span<const Spec> specs, const Options& options, std::span<const std::string> archs,
                    const WarmupProgress& progress) {
  for (const auto& arch : archs) {
    if (!is_supported_arch(arch)) {
      throw Error({.kind = ErrorKind::usage, .message = "unsupported arch", .found = arch,
                   .expected = fmt::format("one of {}", fmt::join(supported_archs(), ", "))});
    }
  }
  std::vector<detail::WarmupJob> jobs;
  for (const auto& spec : specs) {
    each_contract(spec, archs, [&](const OpSpec& op, Contract c) { jobs.push_back({fmt::format("{} {}", spec.file, op.name), std::move(c)}); });
  }
  detail::Compiler compiler(options.cuda_home);
  detail::Cache cache(options, compiler);
  const auto start = std::chrono::steady_clock::now();
  detail::WarmupProgress each;
  if (progress) each = [&](const detail::WarmupOutcome& o, std::size_t done, std::size_t total) { progress(entry_of(o), done, total); };
  const auto outcomes = detail::warmup(cache, jobs, options.jobs, each);
  WarmupReport r{.specs = specs.size(),
                 .jobs = jobs.size(),
                 .threads = detail::warmup_threads(options.jobs, outcomes.size()),
                 .seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                 .cache = cache.root().string()};
  r.entries.reserve(outcomes.size());
  for (const auto& o : outcomes) r.entries.push_back(entry_of(o));
  return r;
}

}  // namespace moejit
