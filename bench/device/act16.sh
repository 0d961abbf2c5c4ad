#!/usr/bin/env bash
# Thirteenth session (nvidia-h200), second run: what an expert's count costs a masked block.
# act15 (bench/results/2026-12-02/act15) showed blocks that find no rows cost ~1.2 us a wave
# (few rows at T_max 8192: 5.7 us with 32 blocks an SM, 10.5 with 64) and speculative first
# loads losing more on skewed counts than they gain half full. Variants (built by patching the tree,
# NOTE.txt):
#   n    the twelfth session's kernel and grid (32 blocks an SM in all)
#   c    grid: one pass of kUnroll chunks over a half-full expert where that needs more blocks
#        than n gives, up to twice as many (the tree as committed)
#   lc   c + the count read through the non-coherent path (__ldg: LDG.E.CONSTANT)
#   lcn  lc + the masked 16-byte data loads without L1 allocation (LDG.E.NA.128.CONSTANT)
# Inputs: half-full experts (dense at the same real rows), every expert full, 0-12 rows an
# expert, expert 0 full; then ncu's L1 hit counts for the few-rows and half-full cases.
source "$(dirname "$0")/common.sh"
V="n c lc lcn"
M=silu_2048_masked,situ_3072_masked
echo "== half full"
variants_ab "$V" half "" $M 64,256,2048,8192 silu_2048,situ_3072 256,1024,8192,32768
echo "== every expert full (T_max 32/128/1024/4096 = dense's 256/1024/8192/32768 rows)"
variants_ab "$V" full "--inputs full" $M 32,128,1024,4096
echo "== few rows an expert (0-12)"
variants_ab "$V" few "--inputs few" $M 64,256,2048,8192
echo "== one expert full"
variants_ab "$V" one "--inputs one-full" $M 64,2048,8192
echo "== ncu: silu_2048_masked T_max 8192 (L1 sectors of global loads: hit / miss; L2 read requests)"
for case in "few n" "few lc" "half-full lc" "half-full lcn"; do
  set -- $case
  timeout 60 ncu --metrics gpu__time_duration.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum,lts__t_requests_srcunit_tex_op_read.sum \
    --kernel-name regex:activation --launch-count 1 $B/moejit_$2 bench bench/specs/activation.json --op silu_2048_masked --tokens 8192 --inputs $1 --calls 1 --replays 1 2>&1 |
    awk -v c="$case" '/duration/{d=$NF} /lookup_hit/{h=$NF} /lookup_miss/{m=$NF} /lts__t_requests/{r=$NF} END {printf "%-14s time %s  L1 hit %s  miss %s  L2 reads %s\n", c, d, h, m, r}' | tee -a $OUT/ncu.txt
done
