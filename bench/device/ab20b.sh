#!/usr/bin/env bash
# Seventh session, third run (nvidia-h200): ab20's build without the bias prefetch (pl: the
# row's logits prefetched into L1) and without any prefetch (np), beside HEAD (old). Built with
# bench/device/build.sh, copied to .carry/moejit_pl and .carry/moejit_np in turn.
source "$(dirname "$0")/common.sh"
ab_variants "old pl np" deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,16384 kimi_k3 1,16,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
