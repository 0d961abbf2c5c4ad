#pragma once
// Test-only: counts every operator new of the process, to prove hot paths allocate nothing.
// Link alloc_counter.cpp into a test binary to use it.

#include <atomic>

namespace moejit::test {
extern std::atomic<long> g_allocations;
}
