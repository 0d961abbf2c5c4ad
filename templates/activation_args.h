#pragma once
// The activation kernel's argument, shared by the host launcher (runtime/) and the template:
// plain data only, so both compilers lay it out alike.

namespace moejit {

struct ActivationArgs {
  const void* in;                // dense [T, 2d]; masked [E, T_max, 2d]
  void* out;                     // dense [T, d];  masked [E, T_max, d]
  const int* expert_num_tokens;  // masked: [E] rows to process per expert; dense: unused
  long long tokens;              // dense: T; masked: T_max (rows per expert)
  int vectorized;                // 1 when `in` and `out` are aligned for the vector path
  const void* table;             // SituGLU by tables: the factors of every bf16 in the window
};

}  // namespace moejit
