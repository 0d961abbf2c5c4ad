#!/usr/bin/env bash
# One GPU call on nvidia-h200-x4 (issue 5): every [gpu] test with the multi-GPU cases at tp 4
# (all four GPUs) and again at tp 2 (two of them), then the latent-tail benchmark at tp 4 and
# tp 2 beside torch (NCCL all-reduce + rms_norm + addmm). Never multicast.
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv,noheader
nvidia-smi topo -m | head -6
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q | grep -E "^warmup"
echo "== [gpu] tests, multi-GPU cases at tp 4"
timeout 300 $B/test_gpu > $OUT/test_gpu_tp4.txt 2>&1; echo "test_gpu exit $?"
grep -E "FAILED|SKIPPED|signal|test cases|assertions|tp [0-9]" $OUT/test_gpu_tp4.txt | head -16
echo "== [tp2] cases at tp 2 (two of the four GPUs)"
CUDA_VISIBLE_DEVICES=0,1 timeout 90 $B/test_gpu "[tp2]" > $OUT/test_gpu_tp2.txt 2>&1; echo "exit $?"
grep -E "FAILED|signal|test cases|assertions|tp [0-9]" $OUT/test_gpu_tp2.txt | head -8
for tp in 4 2; do
  echo "== latent tail bench, tp $tp"
  timeout 80 $B/moejit_tail_bench "\"tp_size\": $tp, \"hidden\": 7168, \"latent\": 3584, \"max_tokens\": 64" 2> $OUT/tail_tp$tp.jsonl | tee $OUT/tail_tp$tp.txt
  timeout 80 python3 bench/latent_tail_torch.py --tp $tp 2>&1 | grep -E "torch" | tee -a $OUT/tail_tp$tp.txt
done
