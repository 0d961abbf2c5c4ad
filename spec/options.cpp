#include <moejit/error.hpp>
#include <moejit/options.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

namespace moejit {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read once, here
  return v ? std::string(v) : std::string();
}

// The error for an environment variable whose value moejit does not take.
[[noreturn]] void bad_variable(const char* name, const std::string& value, std::string expected) {
  throw Error({.kind = ErrorKind::usage, .message = "invalid environment variable", .pointer = name,
               .found = fmt::format("'{}'", value), .expected = std::move(expected)});
}

// $MOEJIT_JOBS: a decimal integer in [1, kMaxJobs], nothing else (no sign, spaces or suffix).
unsigned parse_jobs(const std::string& text) {
  unsigned jobs = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), jobs);
  if (ec != std::errc() || end != text.data() + text.size() || jobs < 1 || jobs > kMaxJobs) {
    bad_variable("MOEJIT_JOBS", text, fmt::format("a number of warmup threads, a decimal integer in [1, {}] (or unset)", kMaxJobs));
  }
  return jobs;
}

}  // namespace

// NOTE: the only place moejit reads the environment. Nothing read here enters a cache key.
Options Options::from_environment() {
  Options o;
  if (auto dir = env("MOEJIT_CACHE_DIR"); !dir.empty()) {
    o.cache_dir = dir;
  } else if (auto xdg = env("XDG_CACHE_HOME"); !xdg.empty()) {
    o.cache_dir = std::filesystem::path(xdg) / "moejit";
  } else if (auto home = env("HOME"); !home.empty()) {
    o.cache_dir = std::filesystem::path(home) / ".cache" / "moejit";
  }  // NOTE: else none: a cache in the shared /tmp would be anyone's to plant in (Cache refuses it)
  if (auto home = env("CUDA_HOME"); !home.empty()) {
    o.cuda_home = home;
  } else if (auto path = env("CUDA_PATH"); !path.empty()) {
    o.cuda_home = path;
  } else {
    o.cuda_home = "/usr/local/cuda";
  }
  o.jobs = std::clamp(std::thread::hardware_concurrency(), 1u, kMaxJobs);
  if (auto jobs = env("MOEJIT_JOBS"); !jobs.empty()) o.jobs = parse_jobs(jobs);
  o.programmatic_launch = env("MOEJIT_PDL") == "1";
  if (auto stash = env("MOEJIT_EXPERTS_STASH"); !stash.empty()) {
    if (stash != "0" && stash != "1") bad_variable("MOEJIT_EXPERTS_STASH", stash, "0 or 1 (or unset)");
    o.experts_stash = stash == "1";
  }
  if (auto path = env("MOEJIT_EXPERTS_PATH"); !path.empty()) {
    if (path == "auto") {
      o.experts_path = ExpertsPath::automatic;
    } else if (path == "decode") {
      o.experts_path = ExpertsPath::decode;
    } else if (path == "prefill") {
      o.experts_path = ExpertsPath::prefill;
    } else {
      bad_variable("MOEJIT_EXPERTS_PATH", path, "auto, decode or prefill (or unset)");
    }
  }
  return o;
}

}  // namespace moejit
