#!/usr/bin/env bash
# Fourteenth session (nvidia-h200), first run: the masked layout as tiles of real rows over a grid
# sized for the machine (t*), against the per-expert grid rows of 400ba35 (n).
# Variants (bench/results/2026-12-02-b/act18/NOTE.txt):
#   n    400ba35: one grid row per expert, at most 32 blocks an SM in all
#   t8   every block scans the E counts into tiles of real rows (one chunk a thread at small
#        T_max, up to kUnroll), block b takes tiles b, b + grid, ...; at most 8 blocks an SM
#   t16  t8 with at most 16 blocks an SM;  t32  at most 32
#   dp   n with the dense grid held to 32 blocks an SM (a diagnostic: what striding costs dense)
source "$(dirname "$0")/common.sh"
tests_of $B/test_gpu_t8 t8 "[activation]"
V="n t8 t16 t32"
M=silu_2048_masked,situ_3072_masked
E=silu_2048_masked_e256
echo "== half full"
variants_ab "$V" half "" $M 64,256,2048,8192 silu_2048,situ_3072 256,1024,8192,32768
echo "== half full, 256 experts (DeepSeek-V3's shape; T_max 16/64/256 = 2048/8192/32768 real rows)"
variants_ab "$V" e256 "" $E 16,64,256 silu_2048 2048
echo "== few rows an expert (0-12)"
variants_ab "$V" few "--inputs few" $M 64,2048,8192 $E 64,256
echo "== one expert full"
variants_ab "$V" one "--inputs one-full" $M 64,2048,8192 $E 256
echo "== every expert full (T_max 1024/4096 = dense's 8192/32768 rows)"
variants_ab "$V" full "--inputs full" $M 32,1024,4096
echo "== dense held to 32 blocks an SM"
variants_ab "n dp" dense "" silu_2048,situ_3072 8192,32768
echo "== ncu (clocks left alone): silu 2048, dense 32768 rows and masked T_max 8192 half full"
for case in "silu_2048 32768 n" "silu_2048_masked 8192 n" "silu_2048_masked 8192 t8" "silu_2048_masked 8192 t16" "silu_2048 32768 dp"; do
  set -- $case
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
    --kernel-name regex:activation --launch-skip 3 --launch-count 1 $B/moejit_$3 bench bench/specs/activation.json --op $1 --tokens $2 --calls 2 --replays 2 2>&1 |
    awk -v c="$case" '/duration/{d=$NF" "$(NF-1)} /bytes_read/{r=$(NF-1)$NF} /bytes_write/{w=$(NF-1)$NF} /dram__throughput/{t=$NF} /warps_active/{o=$NF} END {printf "%-26s us %s  read %s  write %s  dram %% %s  warps %% %s\n", c, d, r, w, t, o}' | tee -a $OUT/ncu.txt
done
