#!/usr/bin/env bash
# Thirteenth session (nvidia-h200), third run: the masked kernel prefetching its next pass into L2.
# act16 (bench/results/2026-12-02/act16): a block costs ~1 ns of the whole GPU whether or not it
# finds rows (few rows at T_max 8192: 5.7 us with 32 blocks an SM, 10.5 with 64), and a thread
# that strides over two passes is ~4% slower than one pass with twice the blocks (half full).
# Variants (NOTE.txt):
#   n   the twelfth session's kernel and grid (32 blocks an SM in all)
#   p   n + the next pass's inputs prefetched into L2 (prefetch.global.L2) before this pass computes
#   pc  p + grid c (one pass over a half-full expert, up to 64 blocks an SM)
#   ph  p with 16 blocks an SM instead of 32
source "$(dirname "$0")/common.sh"
tests_of $B/test_gpu_p p "[activation]"
tests_of $B/test_gpu_pc pc "[activation]"
V="n p pc ph"
S=bench/specs/activation.json
M=silu_2048_masked,situ_3072_masked
echo "== half full"
SPEC=$S BASE=none BENCH_TXT=$OUT/half.txt ab_variants "$V" $M 64,256,2048,8192 silu_2048,situ_3072 256,1024,8192,32768
python3 bench/device/ab_table.py $OUT/half.txt | tee $OUT/half_table.txt
echo "== few rows an expert (0-12)"
SPEC=$S BASE=none BENCH_TXT=$OUT/few.txt BENCH_ARGS="--inputs few" ab_variants "$V" $M 64,2048,8192
python3 bench/device/ab_table.py $OUT/few.txt | tee $OUT/few_table.txt
echo "== every expert full (T_max 1024/4096 = dense's 8192/32768 rows)"
SPEC=$S BASE=none BENCH_TXT=$OUT/full.txt BENCH_ARGS="--inputs full" ab_variants "$V" $M 1024,4096
python3 bench/device/ab_table.py $OUT/full.txt | tee $OUT/full_table.txt
echo "== one expert full"
SPEC=$S BASE=none BENCH_TXT=$OUT/one.txt BENCH_ARGS="--inputs one-full" ab_variants "$V" $M 2048,8192
python3 bench/device/ab_table.py $OUT/one.txt | tee $OUT/one_table.txt
