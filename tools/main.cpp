// moejit: validate specs, compile and inspect kernels, warm and maintain the cache, check and
// time ops on the GPU, and run an op on tensors from .npy files.
#include <moejit/error.hpp>

#include "cli.hpp"
#include "signals.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <system_error>

namespace {

int report(const moejit::Error& e) {
  std::fflush(stdout);  // what the command printed comes first (a failure shows in finish_stdout)
  std::fprintf(stderr, "moejit: %s: %s\n", std::string(moejit::to_string(e.kind())).c_str(), e.what());
  return e.is_bad_input() ? moejit::tools::kBadInput : moejit::tools::kFailure;
}

// NOTE: stdout is buffered, so a failed write (a full disk, a closed pipe's EBADF) often shows
// only at the final flush: checked here, once, for every command. `code` is what the command
// returned; a failed write turns it into exit 3 with one message.
int finish_stdout(int code, int write_errno = 0) {
  errno = 0;
  std::cout.flush();  // NOTE: synced with stdio, so this flushes stdout too, and sets errno
  int err = std::cout.fail() || std::ferror(stdout) ? errno : 0;
  if (std::fflush(stdout) != 0 && err == 0) err = errno;
  if (err == 0 && write_errno == 0 && !std::ferror(stdout) && !std::cout.fail()) return code;
  if (write_errno != 0) err = write_errno;
  return report(moejit::Error({.kind = moejit::ErrorKind::io, .message = "cannot write to standard output", .call = "write",
                               .code = std::strerror(err ? err : EIO)}));
}

int run(const std::vector<std::pair<CLI::App*, moejit::tools::Action>>& commands) {
  using namespace moejit::tools;
  try {
    for (const auto& [sub, action] : commands) {
      if (sub->parsed()) return action();
    }
    return kBadInput;
  } catch (const moejit::Error& e) {
    return report(e);
  } catch (const std::filesystem::filesystem_error& e) {
    // NOTE: a last resort: moejit's own code wraps its filesystem errors, with the path.
    return report(moejit::Error({.kind = moejit::ErrorKind::io, .message = "filesystem operation failed",
                                 .file = e.path1().string(), .code = e.code().message()}));
  } catch (const std::system_error& e) {
    // fmt::print throws this when a write to stdout fails mid-way.
    if (std::ferror(stdout)) return finish_stdout(kFailure, e.code().value());
    std::fprintf(stderr, "moejit: error: %s\n", moejit::detail::printable(e.what(), 2000).c_str());
    return kFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moejit: error: %s\n", moejit::detail::printable(e.what(), 2000).c_str());
    return kFailure;
  }
}

}  // namespace

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
    return finish_stdout(report_parse_error(app, e, std::vector<std::string>(argv + 1, argv + argc)));
  }
  return finish_stdout(run(commands));
}
