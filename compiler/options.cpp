#include <moejit/options.hpp>

#include <cstdlib>
#include <string>
#include <thread>

namespace moejit {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read once, here
  return v ? std::string(v) : std::string();
}

}  // namespace

// NOTE: the only place moejit reads the environment. Nothing read here enters a cache key.
Options Options::from_environment() {
  Options o;
  if (auto dir = env("MOEJIT_CACHE_DIR"); !dir.empty()) {
    o.cache_dir = dir;
  } else if (auto xdg = env("XDG_CACHE_HOME"); !xdg.empty()) {
    o.cache_dir = std::filesystem::path(xdg) / "moejit";
  } else {
    o.cache_dir = std::filesystem::path(env("HOME").empty() ? "/tmp" : env("HOME")) / ".cache" / "moejit";
  }
  if (auto home = env("CUDA_HOME"); !home.empty()) {
    o.cuda_home = home;
  } else if (auto path = env("CUDA_PATH"); !path.empty()) {
    o.cuda_home = path;
  } else {
    o.cuda_home = "/usr/local/cuda";
  }
  o.jobs = std::max(1u, std::thread::hardware_concurrency());
  if (auto jobs = env("MOEJIT_JOBS"); !jobs.empty()) {
    try {
      o.jobs = static_cast<unsigned>(std::max(1, std::stoi(jobs)));
    } catch (...) {
      // An unreadable value keeps the default: the environment is a hint, not input.
    }
  }
  o.programmatic_launch = env("MOEJIT_PDL") == "1";
  return o;
}

}  // namespace moejit
