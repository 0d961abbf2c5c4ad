// The latent-MoE tail at run time (templates/latent_tail.cuh): workspaces, the peer-buffer
// exchange for the fused path, the path choice, and each path's sequence of launches.
#include <moejit/error.hpp>
#include <moejit/latent_moe.hpp>

#include "compiler/ops/latent_tail.hpp"
#include "device.hpp"
#include "kernel.hpp"
#include "latent_tail_choice.hpp"
#include "op_loader.hpp"
#include "tma.hpp"
#include "templates/latent_tail_args.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <exception>
#include <mutex>

#include <unistd.h>

namespace moejit {

namespace detail {
std::string_view latent_tail_paths_json();
}

namespace {

using detail::DeviceBuffer;
using detail::Kernel;

constexpr int kExchangeMinBlocks = 16;
constexpr int kExchangeMaxBlocks = 64;
constexpr int kBf16Vector = 8;  // bf16 elements a 16-byte vector of the gather and permute kernels
constexpr int kPermuteCtasPerSm = 4;

// What ranks exchange to reach each other's peer buffers.
struct PeerInfo {
  CUipcMemHandle handle;
  std::uint64_t pointer;
  std::int32_t pid;
  std::int32_t device;
};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// CTAs of kTailThreads for `tokens` rows of `hidden` bf16 elements a thread a 16-byte vector, at
// least one and at most `most` (the gather and permute kernels loop over what is left).
unsigned vector_blocks(std::int64_t tokens, std::int64_t hidden, std::int64_t most) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(tokens * hidden / kBf16Vector, kTailThreads), 1, most));
}

/// The index of the smallest token tile of `tiles` (ascending) that holds `tokens`; past the
/// largest, the largest (its CTAs side by side).
template <std::size_t N>
std::size_t smallest_tile(const std::array<int, N>& tiles, std::int64_t tokens) {
  std::size_t i = 0;
  while (i + 1 < N && tokens > tiles[i]) ++i;
  return i;
}

/// The latent_tail spec behind a spec's op; any other op (or none) is a usage error.
const LatentTailSpec& tail_spec(const std::shared_ptr<const OpSpec>& spec) {
  const auto* tail = dynamic_cast<const LatentTailSpec*>(spec.get());
  if (!tail) {
    throw Error({.kind = ErrorKind::usage,
                 .message = spec ? fmt::format("op '{}' is a {} op: a LatentMoE runs a latent_tail op", spec->name, spec->family())
                                 : std::string("a LatentMoE needs a latent_tail op, not a null spec"),
                 .found = spec ? std::string(spec->family()) : "null",
                 .expected = "latent_tail"});
  }
  return *tail;
}

}  // namespace

std::string_view to_string(LatentMoE::Path path) noexcept {
  switch (path) {
    case LatentMoE::Path::fused: return "fused";
    case LatentMoE::Path::base_full: return "base";
    case LatentMoE::Path::base_striped: return "base-striped";
  }
  return "?";
}

struct LatentMoE::Impl {
  Context& ctx;
  const detail::Driver& drv;
  const LatentTailSpec& spec;
  Communicator* comm;
  Communicator* shared_comm;
  int rank = 0;
  std::shared_ptr<const Kernel> norm_kernel;                                     ///< every tp
  std::array<std::shared_ptr<const Kernel>, detail::kTailUpProj.size()> upproj_kernels;  ///< every tp, by token tile
  /// sm_90a's tensor-core up projection by token tile, where the contract has it (the calls of
  /// latent_tail_tc_call), with z's TMA descriptors (fixed at load) and W's (of the last call's W).
  std::array<std::shared_ptr<const Kernel>, detail::kTailUpProjTc.size()> upproj_tc;
  std::array<TmaMap, detail::kTailUpProjTc.size()> z_maps{};
  mutable struct {
    const void* base = nullptr;
    TmaMap map{};
  } w_map;
  detail::TailTiling tiling;
  std::shared_ptr<const Kernel> exchange_kernel, gather_kernel, permute_kernel;  ///< tp > 1
  std::int64_t max_tokens = 0;
  int shard = 0;
  // Base path workspaces.
  DeviceBuffer ag_routed, ag_shared, latent_sum, latent_norm, slice_out, ag_out;
  // Fused path.
  DeviceBuffer peer_buffer, shared_sum, phase;  // phase: [phase, done]
  TailPeers peers{};
  std::vector<detail::TailMeasurement> measured;  // from runtime/latent_tail_paths.json
  // NOTE: declared in the reverse of the order they are released: IPC mappings, peer contexts,
  // the error flag, the events, then the side stream.
  detail::Stream side;                 // the second stream of the overlapped shared all-gather
  detail::Event join, fork;
  detail::MappedHostBuffer error_flag;  // set by the fused kernels when a peer never arrives
  std::vector<detail::PrimaryContext> peer_contexts;  // retained for peer access in this process
  std::vector<detail::IpcMapping> ipc_mappings;       // other processes' peer buffers

  Impl(Context& c, const LatentTailSpec& s, Communicator* cm, Communicator* scm)
      : ctx(c), drv(c.driver()), spec(s), comm(cm), shared_comm(scm) {}

  void validate_comm() {
    if (spec.tp_size == 1) return;
    if (!comm) {
      throw Error({.kind = ErrorKind::usage, .message = fmt::format("op '{}' spans {} ranks and needs a communicator", spec.name, spec.tp_size)});
    }
    if (comm->size() != spec.tp_size) {
      throw Error({.kind = ErrorKind::usage, .message = fmt::format("op '{}': tp_size does not match the communicator", spec.name),
                   .found = fmt::format("a communicator of {} ranks", comm->size()), .expected = fmt::format("{} ranks", spec.tp_size)});
    }
    if (comm->device() != ctx.device().ordinal) {
      throw Error({.kind = ErrorKind::usage, .message = fmt::format("op '{}': the communicator is on another device", spec.name),
                   .found = fmt::format("device {}", comm->device()), .expected = fmt::format("device {} (the context's)", ctx.device().ordinal)});
    }
    if (shared_comm && (shared_comm->size() != spec.tp_size || shared_comm->device() != ctx.device().ordinal || shared_comm->rank() != comm->rank())) {
      throw Error({.kind = ErrorKind::usage, .message = "the shared-expert communicator must span the same ranks on the same device"});
    }
    rank = comm->rank();
  }

  void allocate() {
    const std::int64_t t = max_tokens, tp = spec.tp_size, h = spec.hidden, l = spec.latent;
    const std::size_t b16 = 2;
    latent_sum = DeviceBuffer(drv, static_cast<std::size_t>(t * l) * b16);
    latent_norm = DeviceBuffer(drv, static_cast<std::size_t>(t * l) * b16);
    if (tp > 1) {
      ag_routed = DeviceBuffer(drv, static_cast<std::size_t>(tp * t * l) * b16);
      if (spec.shared_expert) ag_shared = DeviceBuffer(drv, static_cast<std::size_t>(tp * t * h) * b16);
      if (spec.striped_possible()) {
        slice_out = DeviceBuffer(drv, static_cast<std::size_t>(t * shard) * b16);
        ag_out = DeviceBuffer(drv, static_cast<std::size_t>(tp * t * shard) * b16);
      }
    }
    side = detail::Stream(drv);
    fork = detail::Event(drv, CU_EVENT_DISABLE_TIMING);
    join = detail::Event(drv, CU_EVENT_DISABLE_TIMING);
  }

  // Fused path: this rank's peer buffer (all slots empty = -0.0), then everyone's addresses.
  void setup_peers() {
    peer_buffer = DeviceBuffer(drv, static_cast<std::size_t>(spec.peer_elements()) * 2);
    MOEJIT_CU(drv, cuMemsetD16Async(peer_buffer.address(), 0x8000, static_cast<std::size_t>(spec.peer_elements()), nullptr));
    shared_sum = DeviceBuffer(drv, static_cast<std::size_t>(spec.slot_tokens()) * static_cast<std::size_t>(shard) * sizeof(float) + 16);
    phase = DeviceBuffer(drv, 2 * sizeof(int));
    MOEJIT_CU(drv, cuMemsetD8Async(phase.address(), 0, phase.bytes(), nullptr));
    error_flag = detail::MappedHostBuffer(drv, sizeof(int));
    detail::check_cu(drv, drv.cuCtxSynchronize(), "cuCtxSynchronize (peer buffers cleared)");
    const PeerInfo mine = peer_info();
    const auto all = exchange_peer_info(mine);
    for (std::size_t r = 0; r < all.size(); ++r) peers.base[r] = reach_peer(static_cast<int>(r), all[r], mine.pid);
  }

  PeerInfo peer_info() const {
    PeerInfo mine{};
    MOEJIT_CU(drv, cuIpcGetMemHandle(&mine.handle, peer_buffer.address()));
    mine.pointer = peer_buffer.address();
    mine.pid = static_cast<std::int32_t>(::getpid());
    mine.device = ctx.device().ordinal;
    return mine;
  }

  // Every rank's PeerInfo, in rank order (an all-gather through the communicator).
  std::vector<PeerInfo> exchange_peer_info(const PeerInfo& mine) const {
    const auto n = static_cast<std::size_t>(spec.tp_size);
    DeviceBuffer send(drv, sizeof(PeerInfo)), recv(drv, n * sizeof(PeerInfo));
    send.upload(&mine, sizeof mine);
    detail::Stream stream(drv);
    detail::check_nccl(ncclAllGather(send.ptr(), recv.ptr(), sizeof(PeerInfo), ncclUint8, comm->get(), stream.get()), "ncclAllGather", comm->get());
    stream.synchronize();
    comm->check();
    std::vector<PeerInfo> all(n);
    recv.download(all.data(), n * sizeof(PeerInfo));
    return all;
  }

  // Rank r's peer buffer as this rank addresses it.
  void* reach_peer(int r, const PeerInfo& info, std::int32_t my_pid) {
    if (r == rank) return peer_buffer.ptr();
    if (info.pid != my_pid) {
      ipc_mappings.emplace_back(drv, info.handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      return reinterpret_cast<void*>(ipc_mappings.back().address());
    }
    // NOTE: IPC handles cannot be opened in the process that made them; a peer of the same
    // process is reached through its pointer, with peer access enabled.
    CUdevice dev = 0;
    MOEJIT_CU(drv, cuDeviceGet(&dev, info.device));
    peer_contexts.emplace_back(drv, dev);
    ctx.make_current();
    const CUresult rc = drv.cuCtxEnablePeerAccess(peer_contexts.back().get(), 0);
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) detail::check_cu(drv, rc, "cuCtxEnablePeerAccess");
    return reinterpret_cast<void*>(info.pointer);
  }

  // True once a fused kernel has reported a peer that never arrived.
  bool peer_timed_out() const noexcept {
    return error_flag.host() && *static_cast<volatile int*>(error_flag.host()) != 0;
  }

  // NOTE: the measured paths are data; runtime/latent_tail_paths.json names the command that re-measures them.
  void load_measurements() { measured = detail::tail_measurements(detail::latent_tail_paths_json(), spec.tp_size); }

  Path choose(std::int64_t tokens) const noexcept { return detail::choose_tail_path(spec, measured, tokens); }

  // ---- launches ----
  // The caller's tensors of one call, named (LatentTailSpec::tensors() gives their order).
  struct CallBuffers {
    const void* routed = nullptr;
    const void* shared = nullptr;  // null without a shared expert
    const void* gamma = nullptr;
    const void* w = nullptr;
    void* out = nullptr;
    Buffer sum_out, norm_out;      // optional copies of R and z
  };

  CallBuffers bind(std::span<const Buffer> b) const {
    const std::size_t g = spec.shared_expert ? 2 : 1;
    return {.routed = b[0].ptr, .shared = spec.shared_expert ? b[1].ptr : nullptr, .gamma = b[g].ptr, .w = b[g + 1].ptr,
            .out = b[g + 2].ptr, .sum_out = b[g + 3], .norm_out = b[g + 4]};
  }

  void allgather(const void* send, void* recv, std::int64_t count, Communicator& c, CUstream stream) const {
    detail::check_nccl(ncclAllGather(send, recv, static_cast<std::size_t>(count), ncclBfloat16, c.get(), stream), "ncclAllGather", c.get());
  }

  // pdl: a PDL launch, which waits on the GPU for the kernel before it (the routed input's writer,
  // or the last call's up projection, which reads z). tp 1 only: at tp > 1 an all-gather precedes it.
  void norm(const void* parts, std::int64_t rank_stride, const void* gamma, std::int64_t tokens, CUstream stream, bool pdl = false) const {
    TailNormArgs a{};
    a.routed = parts;
    a.routed_rank_stride = rank_stride;
    a.gamma = gamma;
    a.latent_sum = latent_sum.ptr();
    a.latent_norm = latent_norm.ptr();
    a.tokens = tokens;
    norm_kernel->launch({static_cast<unsigned>(tokens), 1, 1}, a, stream, pdl);
  }

  struct UpTarget {
    int row0 = 0, rows = 0;
    const void* shared_parts = nullptr;
    std::int64_t shared_rank_stride = 0;
    int ranks = 0;
    const float* shared_sum = nullptr;
    void* out = nullptr;  // null: push to the peers (fused)
    std::int64_t out_ld = 0;
  };

  // The smallest token tile that holds the call (past 64 tokens, tiles of 64), launched with
  // PDL: W streams in while the kernel that writes z (norm or exchange) still runs. The
  // tensor-core kernel where the contract has it, for the calls latent_tail_tc_call names.
  void upproj(const UpTarget& u, const void* w, std::int64_t tokens, CUstream stream) const {
    TailUpArgs a{};
    a.peers = peers;
    a.z = latent_norm.ptr();
    a.w = w;
    a.shared_parts = u.shared_parts;
    a.shared_sum = u.shared_sum;
    a.out = u.out;
    a.phase = static_cast<const int*>(phase.ptr());
    a.tokens = tokens;
    a.shared_rank_stride = u.shared_rank_stride;
    a.out_ld = u.out_ld;
    a.row0 = u.row0;
    a.rows = u.rows;
    a.ranks = u.ranks;
    if (upproj_tc[0] && detail::latent_tail_tc_call(tokens)) {
      const std::size_t size = smallest_tile(detail::kTailUpProjTcTokens, tokens);
      if (w_map.base != w) {
        w_map.map = detail::tma_map(drv, w, spec.latent, spec.hidden, tiling.tc_rows, DType::bf16);
        w_map.base = w;
      }
      const TailUpTcArgs tc{w_map.map, z_maps[size], a};
      const detail::Dim3 grid{static_cast<unsigned>(ceil_div(tokens, detail::kTailUpProjTcTokens[size])),
                              static_cast<unsigned>(u.rows / tiling.tc_rows), 1};
      upproj_tc[size]->launch(grid, tc, stream, /*pdl=*/true);
      return;
    }
    const std::size_t size = smallest_tile(detail::kTailUpProjTokens, tokens);
    a.prefetch_bytes = prefetch_bytes(u.rows, tiling.split);
    const detail::Dim3 grid{static_cast<unsigned>(ceil_div(tokens, detail::kTailUpProjTokens[size])),
                            static_cast<unsigned>(u.rows / (16 * tiling.groups)), 1};
    upproj_kernels[size]->launch(grid, a, stream, /*pdl=*/true);
  }

  // How far ahead of its loads each warp of the up projection asks its W rows into L2: first
  // while the kernel before it runs (the HBM is idle then), then as it streams; a quarter of the
  // L2 in all, so that nothing is evicted before it is read.
  int prefetch_bytes(int rows, int split) const noexcept {
    const auto ranges = static_cast<std::int64_t>(rows) * split;
    return static_cast<int>(static_cast<std::int64_t>(ctx.device().l2_bytes) / 4 / ranges / 64 * 64);
  }

  void copy_out(const Buffer& dst, const DeviceBuffer& src, std::int64_t tokens, CUstream stream) const {
    if (!dst.ptr) return;
    MOEJIT_CU(drv, cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst.ptr), src.address(),
                                     static_cast<std::size_t>(tokens * spec.latent * 2), stream));
  }

  unsigned long long peer_timeout_ns() const noexcept {
    return static_cast<unsigned long long>(spec.peer_timeout_ms) * 1000000ull;
  }

  // tp 1: norm, then the up projection straight into out (the shared output added in its epilogue).
  void run_local(const CallBuffers& c, std::int64_t tokens, CUstream stream, bool chained) const {
    norm(c.routed, 0, c.gamma, tokens, stream, chained || ctx.options().programmatic_launch);
    upproj({.rows = spec.hidden, .shared_parts = c.shared, .ranks = spec.shared_expert ? 1 : 0, .out = c.out, .out_ld = spec.hidden},
           c.w, tokens, stream);
  }

  // Fused: exchange + reduce + norm over the peer buffers, this rank's stripe of the up
  // projection pushed to every rank, then the gather of the stripes; the last two with PDL.
  void run_fused(const CallBuffers& c, std::int64_t tokens, CUstream stream) const {
    launch_exchange(c, tokens, stream);
    upproj({.row0 = rank * shard, .rows = shard, .shared_sum = spec.shared_expert ? static_cast<const float*>(shared_sum.ptr()) : nullptr},
           c.w, tokens, stream);
    launch_gather(c.out, tokens, stream);
  }

  void launch_exchange(const CallBuffers& c, std::int64_t tokens, CUstream stream) const {
    TailNormArgs a{};
    a.peers = peers;
    a.self = peer_buffer.ptr();
    a.routed = c.routed;
    a.shared = c.shared;
    a.gamma = c.gamma;
    a.latent_sum = latent_sum.ptr();
    a.latent_norm = latent_norm.ptr();
    a.shared_sum = static_cast<float*>(shared_sum.ptr());
    a.phase = static_cast<const int*>(phase.ptr());
    a.error = reinterpret_cast<int*>(error_flag.device());
    a.tokens = tokens;
    a.timeout_ns = peer_timeout_ns();
    a.rank = rank;
    const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>(tokens, kExchangeMinBlocks, kExchangeMaxBlocks));
    exchange_kernel->launch({blocks, 1, 1}, a, stream);
  }

  void launch_gather(void* out, std::int64_t tokens, CUstream stream) const {
    TailGatherArgs g{};
    g.self = peer_buffer.ptr();
    g.out = out;
    g.phase = static_cast<int*>(phase.ptr());
    g.done = reinterpret_cast<unsigned*>(static_cast<int*>(phase.ptr()) + 1);
    g.error = reinterpret_cast<int*>(error_flag.device());
    g.tokens = tokens;
    g.timeout_ns = peer_timeout_ns();
    g.rank = rank;
    gather_kernel->launch({vector_blocks(tokens, spec.hidden, ctx.device().sm_count), 1, 1}, g, stream, /*pdl=*/true);
  }

  // Base: all-gather the partials (the shared ones overlapped on a second stream with their own
  // communicator), sum them in rank order in the norm and the GEMM epilogue.
  void run_base(const CallBuffers& c, Path path, std::int64_t tokens, CUstream stream) const {
    const bool shared = spec.shared_expert, overlap = shared && shared_comm;
    if (overlap) {
      fork.record(stream);
      MOEJIT_CU(drv, cuStreamWaitEvent(side.get(), fork.get(), 0));
      allgather(c.shared, ag_shared.ptr(), tokens * spec.hidden, *shared_comm, side.get());
      join.record(side.get());
    }
    allgather(c.routed, ag_routed.ptr(), tokens * spec.latent, *comm, stream);
    if (shared && !shared_comm) allgather(c.shared, ag_shared.ptr(), tokens * spec.hidden, *comm, stream);
    norm(ag_routed.ptr(), tokens * spec.latent, c.gamma, tokens, stream);
    if (overlap) MOEJIT_CU(drv, cuStreamWaitEvent(stream, join.get(), 0));
    UpTarget u{.shared_parts = shared ? ag_shared.ptr() : nullptr, .shared_rank_stride = tokens * spec.hidden,
               .ranks = shared ? spec.tp_size : 0};
    if (path == Path::base_full) {
      u.rows = spec.hidden;
      u.out = c.out;
      u.out_ld = spec.hidden;
      upproj(u, c.w, tokens, stream);
      return;
    }
    run_striped(u, c, tokens, stream);
  }

  // Striped base: this rank's stripe of the up projection, the stripes all-gathered, then permuted into [T, H].
  void run_striped(UpTarget u, const CallBuffers& c, std::int64_t tokens, CUstream stream) const {
    u.row0 = rank * shard;
    u.rows = shard;
    u.out = slice_out.ptr();
    u.out_ld = shard;
    upproj(u, c.w, tokens, stream);
    allgather(slice_out.ptr(), ag_out.ptr(), tokens * shard, *comm, stream);
    TailPermuteArgs p{ag_out.ptr(), c.out, tokens};
    permute_kernel->launch({vector_blocks(tokens, spec.hidden, kPermuteCtasPerSm * ctx.device().sm_count), 1, 1}, p, stream);
  }

  void run(std::span<const Buffer> b, std::int64_t tokens, CUstream stream, bool chained) const {
    const CallBuffers c = bind(b);
    if (spec.tp_size == 1) {
      run_local(c, tokens, stream, chained);
    } else if (const Path path = choose(tokens); path == Path::fused) {
      run_fused(c, tokens, stream);
    } else {
      run_base(c, path, tokens, stream);
    }
    copy_out(c.sum_out, latent_sum, tokens, stream);
    copy_out(c.norm_out, latent_norm, tokens, stream);
  }
};

LatentMoE::LatentMoE(Context& context, std::shared_ptr<const OpSpec> op, Communicator* comm, Communicator* shared_comm)
    : Op(op), impl_(std::make_unique<Impl>(context, tail_spec(op), comm, shared_comm)) {
  auto& m = *impl_;
  const LatentTailSpec* spec = &m.spec;
  context.make_current();
  m.validate_comm();
  m.max_tokens = spec->max_tokens();
  m.shard = spec->hidden / spec->tp_size;
  const auto contract = contracts(*spec, context.device().arch).front();
  auto load = [&](std::string_view role, unsigned threads) {
    auto kernel = context.kernel(contract, role);
    kernel->set_block({threads, 1, 1});
    return kernel;
  };
  m.tiling = detail::latent_tail_tiling(*spec);
  m.norm_kernel = load(detail::kTailNorm, kTailThreads);
  for (std::size_t i = 0; i < m.upproj_kernels.size(); ++i) {
    m.upproj_kernels[i] = load(detail::kTailUpProj[i], static_cast<unsigned>(32 * m.tiling.groups * m.tiling.split));
  }
  if (detail::latent_tail_tc(*spec, context.device().arch)) {
    for (std::size_t i = 0; i < m.upproj_tc.size(); ++i) {
      m.upproj_tc[i] = load(detail::kTailUpProjTc[i], kTailTcThreads);
    }
  }
  if (spec->tp_size > 1) {
    m.exchange_kernel = load(detail::kTailExchange, kTailThreads);
    m.gather_kernel = load(detail::kTailGather, kTailThreads);
    m.permute_kernel = load(detail::kTailPermute, kTailThreads);
  }
  m.allocate();
  if (m.upproj_tc[0]) {
    for (std::size_t i = 0; i < m.z_maps.size(); ++i) {
      m.z_maps[i] = detail::tma_map(m.drv, m.latent_norm.ptr(), spec->latent, m.max_tokens, detail::kTailUpProjTcTokens[i], DType::bf16);
    }
  }
  if (spec->fused_possible()) m.setup_peers();
  m.load_measurements();
  detail::check_cu(m.drv, m.drv.cuCtxSynchronize(), "cuCtxSynchronize (end of LatentMoE setup)");
}

LatentMoE::~LatentMoE() = default;

LatentMoE::Path LatentMoE::path_for(std::int64_t tokens) const noexcept { return impl_->choose(tokens); }

void LatentMoE::check() const {
  if (impl_->peer_timed_out()) {
    throw Error({.kind = ErrorKind::nccl,
                 .message = fmt::format("op '{}': a peer did not arrive within {} ms; this tail is unusable (recreate it)",
                                        impl_->spec.name, impl_->spec.peer_timeout_ms)});
  }
  if (impl_->comm) impl_->comm->check();
}

void LatentMoE::do_launch(std::span<const Buffer> buffers, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const {
  check();
  if (tokens == 0) return;
  impl_->run(buffers, tokens, stream, hints.chained);
}

LatentMoEGroup::LatentMoEGroup(std::shared_ptr<const OpSpec> op, Options options, std::vector<int> devices) {
  const LatentTailSpec* spec = &tail_spec(op);
  if (devices.empty()) {
    for (int i = 0; i < spec->tp_size; ++i) devices.push_back(i);
  }
  if (static_cast<int>(devices.size()) != spec->tp_size) {
    throw Error({.kind = ErrorKind::usage, .message = "a latent-tail group needs one device per rank",
                 .found = std::to_string(devices.size()), .expected = std::to_string(spec->tp_size)});
  }
  for (int d : devices) contexts_.push_back(std::make_unique<Context>(options, d));
  tails_.resize(devices.size());
  if (spec->tp_size > 1) {
    std::vector<Context*> ctxs;
    for (auto& c : contexts_) ctxs.push_back(c.get());
    comms_ = Communicator::create_all(ctxs);
    shared_comms_ = Communicator::create_all(ctxs);
  }
  run([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    tails_[i] = std::make_unique<LatentMoE>(*contexts_[i], op, comms_.empty() ? nullptr : &comms_[i],
                                            shared_comms_.empty() ? nullptr : &shared_comms_[i]);
  });
}

LatentMoEGroup::~LatentMoEGroup() {
  tails_.clear();  // before the communicators they use
}

void LatentMoEGroup::run(const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  std::exception_ptr first;
  std::mutex mutex;
  for (int r = 0; r < size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        contexts_[static_cast<std::size_t>(r)]->make_current();
        fn(r);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

namespace detail {

std::unique_ptr<Op> load_latent_tail(Context& context, std::shared_ptr<const OpSpec> spec) {
  auto s = std::dynamic_pointer_cast<const LatentTailSpec>(spec);
  if (!s) throw Error({.kind = ErrorKind::internal, .message = "not a latent_tail spec"});
  if (s->tp_size > 1) {
    throw Error({.kind = ErrorKind::usage,
                 .message = fmt::format("op '{}' spans {} GPUs: create a LatentMoE with a communicator per rank (or a LatentMoEGroup)",
                                        s->name, s->tp_size),
                 .expected = "tp_size 1 for a single-GPU load"});
  }
  return std::make_unique<LatentMoE>(context, std::move(spec));
}

}  // namespace detail
}  // namespace moejit
