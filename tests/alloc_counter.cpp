#include "alloc_counter.hpp"

#include <cstdlib>
#include <new>

namespace moejit::test {
std::atomic<long> g_allocations{0};  // NOTE: test scaffolding, not library state
}

// NOTE: GCC pairs these replacements with the default ones and warns wrongly about free().
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  ++moejit::test::g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// The array and nothrow forms too: a sanitizer runtime replaces every form this file does not,
// and would then see its own allocations freed by the delete above.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  ++moejit::test::g_allocations;
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return ::operator new(n, t); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
