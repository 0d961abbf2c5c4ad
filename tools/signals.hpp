#pragma once
// How the CLI dies of SIGINT, SIGTERM and SIGHUP: as the shell expects, whatever NVRTC does.

namespace moejit::tools {

/// Call first in main, before any thread starts. Blocks SIGINT, SIGTERM and SIGHUP in this thread
/// (every thread started later inherits the mask) and takes them on a thread of its own, which
/// prints "moejit: interrupted by SIGINT" and dies of the signal with its default action: the
/// shell sees the conventional status (130, 143, 129). A signal the parent left ignored (a
/// background job's SIGINT) stays ignored.
/// NOTE: NVRTC installs handlers for these signals while it compiles that exit(4): a warmup
/// interrupted then exited 4 without a word. Blocked in every thread, they never run.
void take_termination_signals();

}  // namespace moejit::tools
