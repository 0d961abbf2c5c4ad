// The names the README's C++ snippets take from their surroundings (an engine's pointers, sizes,
// stream and NCCL communicator). Included after the snippets' own #includes, so a snippet that
// forgets a header it needs fails here too.
#pragma once

extern void* x_ptr;
extern void* out_ptr;
extern std::size_t x_bytes;
extern std::size_t out_bytes;
extern std::int64_t tokens;
extern CUstream stream;
extern ncclComm_t engine_nccl_comm;
extern std::span<const moejit::Buffer> tail_buffers;
extern std::span<const moejit::Buffer> layer_buffers;
