# MOEJIT_FUZZ=ON: a Clang build whose every target is instrumented for libFuzzer's coverage,
# AddressSanitizer and UndefinedBehaviorSanitizer (any UB report aborts), and the fuzz targets in
# tests/fuzz/. Its own build folder: `scripts/fuzz` makes one (build-fuzz/) and runs them.
option(MOEJIT_FUZZ "Build the libFuzzer targets (Clang; instruments everything)" OFF)
if(MOEJIT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MOEJIT_FUZZ needs Clang (found ${CMAKE_CXX_COMPILER_ID}): -DCMAKE_CXX_COMPILER=clang++")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g
                      -fsanitize-ignorelist=${CMAKE_CURRENT_LIST_DIR}/fuzz-ignorelist.txt)
  # NOTE: --as-needed, as Debian's g++ links by default: nothing may need the driver's stub (runtime/ dlopens it).
  add_link_options(-fsanitize=address,undefined -Wl,--as-needed)
endif()
