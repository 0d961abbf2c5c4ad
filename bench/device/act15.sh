#!/usr/bin/env bash
# Thirteenth session (nvidia-h200): the masked activation against dense at the same real rows.
# Variants (build.sh's tree, patched; bench/results/2026-12-02/act15/NOTE.txt):
#   n   the twelfth session's masked kernel (grid 32 blocks an SM in all, count before the loads)
#   s   n + each thread's first chunk loaded before its count where the first chunks span <= 4 MB
#   sc  s + one pass of kUnroll chunks over a half-full expert where that needs more blocks than
#       n gives (up to twice as many) -- the tree as built ($B/moejit)
#   sbc sc + one load of the count a block (thread 0, shared memory, __syncthreads)
# Half-full experts with the counts rotated and kept in L2 (--hot), few rows an expert (0-12) and
# one expert full; dense at the same real rows for the half-full case.
source "$(dirname "$0")/common.sh"
cp $B/moejit $B/moejit_sc
tests_of $B/test_gpu sc "[activation]"
tests_of $B/test_gpu_sbc sbc "[activation]"
V="n s sc sbc"
M=(silu_2048_masked,situ_3072_masked 64,256,2048,8192)
echo "== half full"
SPEC=bench/specs/activation.json BASE=none BENCH_TXT=$OUT/half.txt ab_variants "$V" "${M[@]}" silu_2048,situ_3072 256,1024,8192,32768
python3 bench/device/ab_table.py $OUT/half.txt | tee $OUT/half_table.txt
echo "== half full, counts in L2"
SPEC=bench/specs/activation.json BASE=none BENCH_TXT=$OUT/hot.txt BENCH_ARGS="--hot expert_num_tokens" ab_variants "$V" "${M[@]}"
python3 bench/device/ab_table.py $OUT/hot.txt | tee $OUT/hot_table.txt
echo "== few rows an expert (0-12)"
SPEC=bench/specs/activation.json BASE=none BENCH_TXT=$OUT/few.txt BENCH_ARGS="--inputs few" ab_variants "$V" "${M[@]}"
python3 bench/device/ab_table.py $OUT/few.txt | tee $OUT/few_table.txt
echo "== one expert full"
SPEC=bench/specs/activation.json BASE=none BENCH_TXT=$OUT/one.txt BENCH_ARGS="--inputs one-full" ab_variants "$V" "${M[@]}"
python3 bench/device/ab_table.py $OUT/one.txt | tee $OUT/one_table.txt
