#include "signals.hpp"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include <pthread.h>
#include <signal.h>

namespace moejit::tools {

namespace {

constexpr int kTerminationSignals[] = {SIGINT, SIGTERM, SIGHUP};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
  }
  return "a signal";
}

// Waits for one of `taken`, then dies of it. Every other thread keeps the signals blocked, so
// the default action, restored here, is the only one left to run.
[[noreturn]] void die_of_first(sigset_t taken) {
  int sig = 0;
  while (::sigwait(&taken, &sig) != 0) {
  }
  std::fprintf(stderr, "moejit: interrupted by %s\n", signal_name(sig));
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigemptyset(&default_action.sa_mask);
  ::sigaction(sig, &default_action, nullptr);
  sigset_t only;
  ::sigemptyset(&only);
  ::sigaddset(&only, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(sig);
  std::_Exit(128 + sig);  // NOTE: reached only if a handler installed in between returned
}

}  // namespace

void take_termination_signals() {
  sigset_t blocked, taken;
  ::sigemptyset(&blocked);
  ::sigemptyset(&taken);
  for (int sig : kTerminationSignals) {
    ::sigaddset(&blocked, sig);
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) ::sigaddset(&taken, sig);
  }
  ::pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
  bool any = false;
  for (int sig : kTerminationSignals) any = any || ::sigismember(&taken, sig) == 1;
  // NOTE: detached: it lives, blocked in sigwait, until the process exits.
  if (any) std::thread(die_of_first, taken).detach();
}

}  // namespace moejit::tools
