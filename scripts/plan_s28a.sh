#!/usr/bin/env bash
# Session 28, frozen in the commit that added it, before it ran. A host of two GPUs (nvidia-h100-x2, or the H200 pair
# the tool may lend instead).
# Question: what does archline run's default (sensors, automatic duty-cycled tracing, the injection library) cost the
# launch-bound decode loop (GPT-2 greedy decoding with a KV cache, fp16, benchmarks/workloads/gpt2_decode.py), on the
# program's own time per loop? Sessions 7-12 and 26 could not say: one process after another, the loop's speed moved
# 12-41 % (slow spells of seconds on the lent hosts), and 5 pairs cannot place 3 % in that.
# How (benchmarks/overhead_concurrent.py): each repetition starts two copies at the same moment, one on each GPU and
# its own 8 CPUs, after both have set up; one copy runs under `archline run --gpu N` (the installed wheel's default),
# the other plain. Over the stretch both blocks (30 s, three automatic duty periods) cover, the ratio of their times
# per loop; the recorded copy alternates between the GPUs, and each pair of repetitions cancels the GPUs' own
# difference. 2 repetitions first record neither (the GPUs' own difference, and how far it moves), then 10 (5 pairs).
# Decided before the run: the verdict is bench_run_overhead.py's for `auto` since session 12: the pairs' Hodges-Lehmann
# estimate and signed-rank interval (94 % at n = 5), PASS if the whole interval lies inside ±3 %, FAIL at or above
# +3 %, NOISE at or below -3 %, UNRESOLVED across a limit. Printed beside it, not judged: the two unrecorded
# repetitions' difference, the GPUs' difference from each pair, the correlation of the two copies' speeds over 2 s
# bins (whether the host's spells hit both alike) and the host's steal time.
# About 14 minutes held. Run detached (scripts/device_bg.sh start 560 plan_s28a, then wait). Locally:
# scripts/slim_tree.sh out first, back after. Archive: all-*.
#   OUT=/dir scripts/plan_s28a.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.device_count(), "GPUs")'
SKIP_INSTALL=1 OUT="$OUT/all" scripts/device.sh concurrent
