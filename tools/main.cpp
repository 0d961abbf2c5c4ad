// moejit: validate specs, compile and inspect kernels, warm and maintain the cache, check and
// time ops on the GPU, and run an op on tensors from .npy files.
#include <moejit/error.hpp>

#include "cli.hpp"
#include "signals.hpp"

#include <fmt/format.h>

#include <cstdio>

int main(int argc, char** argv) {
  using namespace moejit::tools;
  take_termination_signals();  // first: before any thread starts
  CLI::App app{"moejit: a JIT kernel-generation compiler for Mixture-of-Experts GPU ops.\n"
               "Exit codes: 0 ok, 1 a check failed, 2 bad input, 3 could not run (no GPU, driver or toolchain).\n"
               "Killed by SIGINT, SIGTERM or SIGHUP, it dies of that signal (a shell reports 130, 143, 129)."};
  app.name("moejit");
  app.require_subcommand(1);
  app.set_version_flag("--version", "moejit 0.1.0");
  std::vector<std::pair<CLI::App*, Action>> commands;
  for (auto add : {add_validate, add_compile, add_warmup, add_cache, add_check, add_bench, add_run}) {
    const auto before = app.get_subcommands({}).size();
    Action action = add(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(action));
  }
  refuse_empty_values(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return report_parse_error(app, e, std::vector<std::string>(argv + 1, argv + argc));
  }
  try {
    for (auto& [sub, action] : commands) {
      if (sub->parsed()) return action();
    }
    return kBadInput;
  } catch (const moejit::Error& e) {
    std::fflush(stdout);  // what the command printed comes first
    std::fprintf(stderr, "moejit: %s: %s\n", std::string(moejit::to_string(e.kind())).c_str(), e.what());
    return e.is_bad_input() ? kBadInput : kFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moejit: error: %s\n", moejit::detail::printable(e.what(), 2000).c_str());
    return kFailure;
  }
}
