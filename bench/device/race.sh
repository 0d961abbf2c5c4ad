#!/usr/bin/env bash
# Sixteenth session (nvidia-h200): after sanitize.sh's racecheck found the routing warp kernel's
# shared records unordered between the fast rounds and the exact ones (ties) and before the lazy
# records' resolution, a __syncwarp on each of those two rare paths (templates/routing.cuh).
# r0: .carry/moejit_r0, the build before (5b50d1c); .carry/moejit, test_gpu: this tree.
# Run: `timeout 330 bash bench/device/race.sh; bash bench/device/pack_out.sh`.
source "$(dirname "$0")/common.sh"
SECONDS=0
gpu_tests "[routing]"
echo "(${SECONDS}s)"
for t in racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $t $B/moejit check bench/specs/routing.json --op deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp --tokens 1,7,129 > $OUT/san_$t.txt 2>&1
  echo "$t: exit $? -- $(grep -E 'SUMMARY|cases on' $OUT/san_$t.txt | tr -s ' ' | tr '\n' ';') (${SECONDS}s)"
  grep -E "^========= (Error|Warning)" -A2 $OUT/san_$t.txt | sed 's/.*RoutingArgs)//' | sort | uniq -c | sort -rn | head -8
done
timeout 100 compute-sanitizer --tool memcheck $B/moejit check bench/specs/activation.json --op situ_3072,gelu_2048 --tokens 4500 > $OUT/san_act_mem.txt 2>&1
echo "memcheck activation strided: exit $? -- $(grep -E 'SUMMARY|cases on' $OUT/san_act_mem.txt | tr -s ' ' | tr '\n' ';') (${SECONDS}s)"
SPEC=bench/specs/routing.json BASE=new BENCH_TXT=$OUT/ab.txt ab_variants "r0 new" deepseek_v3_warp,kimi_k3_warp 1,128
python3 bench/device/ab_table.py $OUT/ab.txt
echo "(${SECONDS}s)"
