#!/usr/bin/env bash
# Session 28, frozen in the commit that added it, before it ran. A host of two GPUs (nvidia-h100-x2).
# plan_s28a (H100s GPU-0c50489b and GPU-2d47e4f9) left the decode loop's whole cost UNRESOLVED (+6.30 %
# [-5.97, +21.97]): the two concurrent copies did not slow down together. plan_s28b (H100s GPU-3c3176cd, GPU-dbb6c5cb)
# found why: the loop's main thread is on its CPU 100 % of the time, the SM clock stays at 1980 MHz, and each CPU of
# the host changes its own pure-Python speed by up to 1.7x in spells of seconds (a spin on another CPU did not
# follow the copies: r = 0.10 and 0.00).
# So here each copy's main thread is pinned to one CPU and times a pure-Python spin (500 000 iterations) before its
# first loop and after each; a loop's time over the mean of the spins around it is its time per CPU speed.
# As plan_s28a otherwise (benchmarks/overhead_concurrent.py, archline run's default as installed, the recorded copy
# alternating between the GPUs), with 20 s blocks (two automatic duty periods) and no unrecorded repetitions (the
# session's device time): 10 repetitions, 5 pairs.
# Decided before the run: the verdict is on the time per loop per CPU speed, by bench_run_overhead.py's rule for
# `auto` since session 12 (the pairs' Hodges-Lehmann estimate, its signed-rank interval, 94 % at n = 5: PASS inside
# ±3 %, FAIL at or above +3 %, NOISE at or below -3 %, UNRESOLVED across a limit). The time per loop as it ran is
# printed beside it, not judged.
# About 10 minutes held. Run detached (scripts/device_bg.sh start 560 plan_s28c, then wait); the summary is written
# after each repetition. Locally: scripts/slim_tree.sh out first, back after. Archive: all-*.
#   OUT=/dir scripts/plan_s28c.sh
# shellcheck source=scripts/plan_common.sh
. "$(dirname "$0")/plan_common.sh"
SKIP_INSTALL=1 CONCURRENT_REPS=10 CONCURRENT_AA=0 CONCURRENT_BLOCK_S=20 CONCURRENT_SPIN_N=500000 OUT="$OUT/all" \
  scripts/device.sh concurrent
