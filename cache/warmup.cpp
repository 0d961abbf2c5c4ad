#include "warmup.hpp"

#include <moejit/error.hpp>

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
