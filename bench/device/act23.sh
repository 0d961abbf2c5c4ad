#!/usr/bin/env bash
# Fifteenth session (nvidia-h200), first run: does a thread striding a grid apart over its
# expert's rows cost the masked kernel its ~7% against dense at large T_max, and does a block
# walking its own contiguous rows instead win it back? (Striding, every pass of a block lands
# ~528 rows = 4 MB further on -- another 2 MB page -- while dense's resident blocks share pages.)
# Variants (NOTE.txt):
#   n     the shipped tree (fcbe807)
#   dp    n with the dense grid held to 32 blocks an SM (runtime/activation_op.cpp
#         `std::min<std::int64_t>(blocks, 0x7fffffff)` -> `... 32 * sm_count_)`): dense striding
#   bk    each block of a masked expert takes one contiguous range of whole passes (bk.patch)
#   bkdp  bk, dense blocked too (MOEJIT_BLOCKED_DENSE 1) and held to 32 blocks an SM as dp
# Run: `timeout 500 bash bench/device/act23.sh; bash bench/device/pack_out.sh`.
source "$(dirname "$0")/common.sh"
tests_of $B/test_gpu_bk bk "[activation]"
M=silu_2048_masked,situ_3072_masked
E=silu_2048_masked_e256
echo "== dense: one pass (n), striding at 32 blocks an SM (dp), contiguous at 32 blocks an SM (bkdp)"
variants_ab "n dp bkdp" dense "" silu_2048,situ_3072 1024,8192,32768
echo "== half full"
variants_ab "n bk" half "" $M 64,256,2048,8192
echo "== half full, 256 experts (T_max 16/64/256 = 2048/8192/32768 real rows)"
variants_ab "n bk" e256 "" $E 16,64,256
echo "== few rows an expert (0-12), one expert full, every expert full"
variants_ab "n bk" few "--inputs few" $M 8192 $E 256
variants_ab "n bk" one "--inputs one-full" $M 8192 $E 256
variants_ab "n bk" full "--inputs full" $M 4096
