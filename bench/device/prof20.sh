#!/usr/bin/env bash
# Seventh session, first GPU call (nvidia-h200): where the time goes before changing anything.
# ncu pipe utilization and stall reasons of the warp routing kernel at T=16384 (DeepSeek-V3,
# Qwen3, GLM-4.5, Kimi-K3), Kimi-K3's per-SASS-line stall samples at T=128 (one token a warp:
# its latency chain), and the masked activation beside dense at the same real rows.
source "$(dirname "$0")/common.sh"
M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_cbu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_adu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
met() {  # name kernel-regex spec op tokens
  echo "== $1"
  timeout 120 ncu --metrics "$M" --kernel-name regex:$2 --launch-count 1 $B/moejit bench $3 --op $4 --tokens $5 --calls 1 --replays 1 2>&1 |
    grep -E "^\s+(gpu__|dram__|smsp__|sm__)" | awk '$NF != "0" && $NF != "0.00"' | sed 's/smsp__average_warps_issue_stalled_//' | tee $OUT/$1_metrics.txt
}
R=bench/specs/routing.json A=bench/specs/activation.json
met dsw routing_warp $R deepseek_v3_warp 16384
met qww routing_warp $R qwen3_warp 16384
met glw routing_warp $R glm45_warp 16384
met k3w routing_warp $R kimi_k3_warp 16384
met k3w128 routing_warp $R kimi_k3_warp 128
met situ_dense activation $A situ_3072 8192
met situ_masked activation $A situ_3072_masked 2048
met situ7168_16 activation $A situ_7168 16
echo "== k3 T=128 stall samples by line"
timeout 150 ncu --section SourceCounters --warp-sampling-interval 0 --kernel-name regex:routing_warp --launch-count 1 \
  --page source --csv --print-source sass $B/moejit bench $R --op kimi_k3_warp --tokens 128 --calls 1 --replays 1 > /tmp/k3s.csv 2>&1
python3 bench/device/sass_summary.py /tmp/k3s.csv 128 0 "Warp Stall Sampling (All Samples)" > $OUT/k3w128_stalls.txt
python3 bench/device/sass_summary.py /tmp/k3s.csv 128 0 > $OUT/k3w128_sass.txt
head -2 $OUT/k3w128_stalls.txt
cp /tmp/k3s.csv $OUT/ 2>/dev/null
