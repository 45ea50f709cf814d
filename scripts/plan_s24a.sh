#!/usr/bin/env bash
# Prepared in session 23 for the next device session (frozen in the commit that added it; not yet run). One GPU (ask
# nvidia-h100-x1: the transformer's pairs failed on H100s GPU-80bea713 and GPU-30c01d2f by its largest cuBLAS GEMM,
# whose measurements alone had a 1 σ of 2.5-4.2 % each, docs/replay.md "Session 23"). Holds out graph replay's
# measuring a group alone again while its mean's 1 σ is above 1 % × √passes (replay._alone, up to 6 a pass;
# committed before this plan), with the fixed cost's allocation as in plan_s23c, whose steps it runs:
#   1. the transformer's graph replay in two separate processes, 3 s a configuration, three passes each, then
#      benchmarks/replay_across.py against 3 %;
#   2. ResNet-50's pair at plan_s18b's settings (1 s, one pass).
# About 7 to 15 minutes (the noisy groups' further measurements). Run detached (scripts/device_bg.sh start 570
# plan_s24a, then wait). Locally: scripts/slim_tree.sh out first, back after. The transformer's archives come back
# as all-*-transformer, ResNet-50's as all-*.
#   OUT=/dir scripts/plan_s24a.sh
# Its steps are plan_s23c's, unchanged; only archline differs.
exec "$(dirname "$0")/plan_s23c.sh"
