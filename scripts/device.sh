#!/usr/bin/env bash
# Reproduce archline's shipped runs on a machine with an NVIDIA GPU: build archline's wheel from this
# checkout, install it as a user would, then run the named steps. Every shipped run under results/
# names the step that made it (docs/results.md).
#
#   OUT=/some/dir scripts/device.sh STEP [STEP ...]
#
# Steps (each writes run directories under $OUT/results/<gpu>/... and a log under $OUT/logs):
#   sensor          archline sensor calibrate + sensor validate of this board, in one run (SENSOR_VALIDATE=0: calibrate
#                   only; the profile goes to the user's cache, so a later archline run in the same call takes it)
#   characterize    archline characterize (the full suite, with the roofline section)
#   quick           archline characterize --quick --roofline
#   instructions    archline instructions --shapes full --opt 3,0 --target-s 0.4 (every SM)
#   roofline        archline roofline (sweep, fit, held-out and ML kernels counted with ncu; ROOFLINE_LIMIT s)
#   real            benchmarks/validate_real_programs.py (measure of PyTorch training, GEMM, regions)
#   replay          benchmarks/validate_replay.py (graph replay of a ResNet-50 step, bf16 channels_last, batch 64,
#                   and a transformer step; 2 runs each for reproducibility; each workload in a child process,
#                   restarted without a group whose replay loses the context; ~3.5 min on an H100)
#   attribution     benchmarks/validate_attribution_real.py (per-kernel energy of real loops: replay with its prefix
#                   randomized design, ~4 min a workload, then archline run with its priors; ~10 min in all)
#   tensor          archline characterize --only tensor --only operand.ffma --only lat (tensor cores,
#                   operand data, pointer-chase latency)
#   latency         archline characterize --only lat (pointer-chase latency alone)
#   model           benchmarks/validate_model_ml.py on the roofline step's run (the frozen model's scores)
#   across          benchmarks/validate_replay.py twice, in separate processes (REPLAY_ONLY, transformer by default), then
#                   benchmarks/replay_across.py: each group's isolated energy from one capture to the next (issue 13's 3 %)
#   contention      benchmarks/sensor_contention.py (a launch + synchronise loop's latency with no sensors, archline's, and
#                   CONTENTION_COPIES samplers (16; 1: no dose): whether the sensors delay a program's CUDA calls;
#                   CONTENTION_SECONDS, 90 by default; CONTENTION_LAUNCHES kernels per synchronise, 1)
#   interleaved     benchmarks/overhead_interleaved.py (the default's cost inside one process: the transformer step
#                   and the decode loop, INTERLEAVED_SECONDS each, sensors toggled every INTERLEAVED_TOGGLE_S s, 10 by default)
#   concurrent      benchmarks/overhead_concurrent.py (two GPUs: the same program twice at once, one under archline run,
#                   the recorded one alternating; CONCURRENT_WORKLOAD decode, CONCURRENT_REPS 10, CONCURRENT_AA 2,
#                   CONCURRENT_BLOCK_S 30, CONCURRENT_SPIN_N 0 (judge per CPU speed: overhead_concurrent.py --spin-n);
#                   ~13 min for the decode loop)
#   overhead        benchmarks/bench_run_overhead.py (archline run's default tracing cost on CNN and transformer
#                   training and a decode loop; 7 alternating pairs of 20 s blocks (two duty periods), children pinned;
#                   ~5-6 min per workload: pass OVERHEAD_WORKLOADS=one per call)
#   node            benchmarks/validate_node.py (every GPU of the node, DDP, the Dask fleet)
#   noderun         benchmarks/validate_node.py --only run: archline run --gpu all over a 2-rank torchrun DDP
#                   transformer job (~20 s): per GPU, its rows vs its own energy counter, kernel and NCCL rows
#   probe           benchmarks/replay_probe.py (which node switches a captured step survives)
#   datacheck       benchmarks/replay_data_check.py (does archline.replay leave a training step's weights as
#                   it found them, and measure the step at the energy it has on real data; ~2 min) and
#                   benchmarks/graph_vs_eager.py (the same step eager against replayed; ~1.5 min)
#   nanprobe        benchmarks/nan_probe.py (which groups make NaN switched off alone; halves with them kept on)
#   burst           benchmarks/burst_power.py (a bf16 GEMM's board power between idle gaps against the power limit;
#                   ~2 min)
#   gputest         the tests marked gpu (tests/gpu) against the installed wheel
#
# Environment: QUICK=1 passes --quick where a step has it. ATTRIBUTION_ARGS adds arguments to the attribution step. ON_GPU=N runs the replay and attribution
# steps on GPU N (default 0). SKIP_INSTALL=1 reuses the archline an earlier call installed. Wheels of packages the machine lacks
# (hatchling to build the wheel, cupti-python, dask...) are taken from .whl/ when present.
# archline never changes clocks, power limits or persistence mode; neither does this script.
set -u
OUT=${OUT:?set OUT to a writable directory}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
site=${ARCHLINE_SITE:-/tmp/archline-site}
mkdir -p "$OUT/logs" "$site"

install() {
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl || return 1
  fi
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"
  rm -rf /tmp/archline-dist
  python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w /tmp/archline-dist . || return 1
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" /tmp/archline-dist/archline-*.whl || return 1
  (cd /tmp && python3 -c "import archline, sys; print('archline', archline.__version__, 'from', archline.__file__)")
}

gpu_name() {
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr 'A-Z' 'a-z' | grep -oE 'h100|h200|a100|b200|gb200|l40s?|[a-z][0-9]{2,4}' | head -1
}

step() {  # step NAME LIMIT_S CMD...: run with a time limit, log, keep going on failure
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s)
  echo "=== $name (limit ${limit} s)"
  (cd /tmp && timeout "$limit" "$@") >"$OUT/logs/$name.log" 2>&1
  local rc=$?
  echo "--- $name: rc=$rc, $(( $(date +%s) - t0 )) s"
  tail -n "${TAILN:-25}" "$OUT/logs/$name.log"
}

if [ "${SKIP_INSTALL:-0}" = 1 ]; then  # an earlier call of this script installed archline into $site
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"; echo "archline already in $site" >"$OUT/logs/install.log"
else
  install >"$OUT/logs/install.log" 2>&1 || { cat "$OUT/logs/install.log"; echo "install failed"; exit 1; }
fi
tail -1 "$OUT/logs/install.log"
G=${GPU:-$(gpu_name)}; G=${G:-gpu}
R="$OUT/results/$G"; mkdir -p "$R"
nvidia-smi --query-gpu=index,name,uuid,driver_version,power.limit,clocks.sm,clocks.mem,persistence_mode,temperature.gpu --format=csv >"$OUT/logs/nvidia-smi.csv" 2>&1
q=(); [ "${QUICK:-0}" = 1 ] && q=(--quick)
B="$here/benchmarks"

for s in "$@"; do
  case "$s" in
    sensor) step calibrate 150 archline sensor calibrate -o "$R/sensor/calibration"
            [ "${SENSOR_VALIDATE:-1}" = 1 ] && step validate 200 archline sensor validate -o "$R/sensor/validation" ;;
    characterize) step characterize 590 archline characterize -o "$R/characterize" ;;
    quick) step quick 300 archline characterize --quick --roofline -o "$R/characterize-quick" ;;
    instructions) step instructions 430 archline instructions --shapes full --opt 3,0 --target-s 0.4 -o "$R/instructions" ;;
    roofline) step roofline ${ROOFLINE_LIMIT:-900} archline roofline -o "$R/roofline" ;;
    real) step real 300 python3 "$B/validate_real_programs.py" --out "$R/real" ${REAL_ONLY:+--only "$REAL_ONLY"} "${q[@]}" ;;
    replay) TAILN=${TAILN:-70} step replay ${REPLAY_LIMIT:-200} python3 "$B/validate_replay.py" --out "$R/replay" --gpu ${ON_GPU:-0} \
              --only ${REPLAY_ONLY:-resnet50,transformer} --budget-s ${REPLAY_BUDGET_S:-180} ${REPLAY_ARGS:-} "${q[@]}" ;;
    across) for run in a b; do  # two separate processes (captures) of the same steps, then compared group by group
              TAILN=${TAILN:-40} step across-$run ${REPLAY_LIMIT:-200} python3 "$B/validate_replay.py" --out "$R/replay-across-$run" \
                --gpu ${ON_GPU:-0} --only ${REPLAY_ONLY:-transformer} --repeats 1 --budget-s ${REPLAY_BUDGET_S:-150} --no-marginal ${REPLAY_ARGS:-}
            done
            for w in $(echo ${REPLAY_ONLY:-transformer} | tr , ' '); do
              step across-$w 60 python3 "$B/replay_across.py" "$R/replay-across-a/$w" "$R/replay-across-b/$w"
            done ;;
    contention) step contention ${CONTENTION_LIMIT:-200} python3 "$B/sensor_contention.py" --gpu ${ON_GPU:-0} \
                  --seconds ${CONTENTION_SECONDS:-90} --copies ${CONTENTION_COPIES:-16} --launches ${CONTENTION_LAUNCHES:-1} \
                  --json "$OUT/logs/sensor_contention.json"
                lscpu -e >"$OUT/logs/lscpu.txt" 2>&1 ;;
    attribution) step attribution ${ATTRIBUTION_LIMIT:-900} python3 "$B/validate_attribution_real.py" --out "$R/run" --gpu ${ON_GPU:-0} ${ATTRIBUTION_ARGS:-} "${q[@]}" ;;
    tensor) step tensor 420 archline characterize --only tensor --only operand.ffma --only lat -o "$R/characterize-tensor" ;;
    latency) step latency 120 archline characterize --only lat -o "$R/characterize-latency" ;;
    model) TAILN=60 step model 120 python3 "$B/validate_model_ml.py" "$R/roofline" ;;
    probe) for w in ${PROBE_ONLY:-mlp transformer}; do step probe-$w ${PROBE_LIMIT:-150} python3 "$B/replay_probe.py" --out "$R/replay" --workload $w --jobs ${PROBE_JOBS:-6} ${PROBE_ARGS:-}; done ;;
    overhead) ow=/tmp/archline-overhead-${ON_GPU:-0}; ov=overhead-${OVERHEAD_WORKLOADS:-all}
              step $ov ${OVERHEAD_LIMIT:-570} python3 "$B/bench_run_overhead.py" --gpu ${ON_GPU:-0} --cpus ${OVERHEAD_CPUS:-auto} \
                --workloads ${OVERHEAD_WORKLOADS:-resnet,torch,decode} --modes ${OVERHEAD_MODES:-auto} --reps ${OVERHEAD_REPS:-7} \
                --min-block-s ${OVERHEAD_BLOCK_S:-20} --out $ow
              mkdir -p "$R/run/$ov" && cp $ow/overhead_summary.json "$OUT/logs/$ov.log" "$R/run/$ov/" ;;
    concurrent) cw=/tmp/archline-concurrent; rm -rf "$cw"  # two copies at once on GPUs 0 and 1, one under archline run
              step concurrent ${CONCURRENT_LIMIT:-1500} python3 "$B/overhead_concurrent.py" --gpus 0,1 \
                --workload ${CONCURRENT_WORKLOAD:-decode} --reps ${CONCURRENT_REPS:-10} --aa ${CONCURRENT_AA:-2} \
                --block-s ${CONCURRENT_BLOCK_S:-30} --spin-n ${CONCURRENT_SPIN_N:-0} --out "$cw"
              lscpu -e >"$OUT/logs/lscpu.txt" 2>&1
              d="$R/bench/overhead-concurrent"; mkdir -p "$d" && cp "$cw/overhead_concurrent.json" "$cw/children.log" "$d/"
              for m in "$cw"/run-*/manifest.json; do [ -f "$m" ] && cp "$m" "$d/$(basename "$(dirname "$m")")-manifest.json"; done ;;
    interleaved) iw=/tmp/archline-interleaved-${ON_GPU:-0}; rm -rf "$iw"  # the default's cost inside one process
              step interleaved ${INTERLEAVED_LIMIT:-570} python3 "$B/overhead_interleaved.py" --gpu ${ON_GPU:-0} \
                --workloads ${INTERLEAVED_WORKLOADS:-torch,decode} --seconds ${INTERLEAVED_SECONDS:-150} --toggle-s ${INTERLEAVED_TOGGLE_S:-10} \
                --sensor-copies ${INTERLEAVED_COPIES:-1} --out "$iw"
              lscpu -e >"$OUT/logs/lscpu.txt" 2>&1
              mkdir -p "$R/bench/overhead-interleaved" && cp "$iw/overhead_interleaved.json" "$R/bench/overhead-interleaved/" ;;
    datacheck) step datacheck 300 python3 "$B/replay_data_check.py" --gpu ${ON_GPU:-0} --json "$OUT/logs/replay_data_check.json"
               step graph_vs_eager 200 python3 "$B/graph_vs_eager.py" --gpu ${ON_GPU:-0} --rounds 2 --json "$OUT/logs/graph_vs_eager.json" ;;
    nanprobe) step nanprobe ${NANPROBE_LIMIT:-420} python3 "$B/nan_probe.py" --gpu ${ON_GPU:-0} --json "$OUT/logs/nan_probe${NANPROBE_TAG:-}.json" ${NANPROBE_ARGS:-} ;;
    burst) step burst 300 python3 "$B/burst_power.py" --gpu ${ON_GPU:-0} --json "$OUT/logs/burst_power.json" ;;
    gputest) step gputest 200 python3 -m pytest -q -p no:cacheprovider --rootdir "$here" -c "$here/pyproject.toml" -m gpu "$here/tests/gpu" ;;
    node) step node 400 python3 "$B/validate_node.py" --out "$R/node" ;;
    noderun) step noderun 230 python3 "$B/validate_node.py" --out "$R/noderun" --only run --budget-s 220 ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done

# What comes back: one archive of the run directories and one of the logs (the device tool returns
# at most 8 files, each at most 16 MB): files over ${MAX_FILE_MB:-4} MB are listed, not kept, except raw CUPTI
# traces (*.bin), which come back beside the archives xz-packed (large-<path>.xz, ≤ 15 MB each, at most
# ${MAX_LARGE:-3}; .gz before session 26), so that an attribution can be redone on a CPU: unpack one into its run
# directory's raw/cupti/.
n_large=0
find "$OUT/results" -type f -name '*.bin' -size +"${MAX_FILE_MB:-4}"M 2>/dev/null | sort | while read -r f; do
  [ "$n_large" -ge "${MAX_LARGE:-3}" ] && break
  rel=${f#"$OUT/results/"}; g="$OUT/large-$(echo "$rel" | tr '/' '+').xz"
  # xz (Python's lzma, always there), used since session 26: session 22's batch-128 trace (GPU-e7ad0b8d) packs to
  # 1.06 MB (lzma preset 6) against gzip -1's 2.05 MB (`xz -dc TRACE | gzip -1 | wc -c`)
  python3 -c 'import lzma, shutil, sys
with open(sys.argv[1], "rb") as i, lzma.open(sys.argv[2], "wb", preset=6) as o: shutil.copyfileobj(i, o)' \
    "$f" "$g" && if [ "$(stat -c %s "$g")" -le 15000000 ]; then
    echo "$rel -> $(basename "$g")" >>"$OUT/logs/large-files.txt"; rm -f "$f"; n_large=$((n_large + 1))
  else rm -f "$g"; fi
done
find "$OUT/results" -type f -size +"${MAX_FILE_MB:-4}"M -printf '%s %p\n' >"$OUT/logs/dropped-large-files.txt" 2>/dev/null
find "$OUT/results" -type f -size +"${MAX_FILE_MB:-4}"M -delete 2>/dev/null
tar -C "$OUT/results" -czf "$OUT/results-$G-$(IFS=-; echo "$*").tar.gz" . && rm -rf "$OUT/results"
tar -C "$OUT" -czf "$OUT/logs-$G-$(IFS=-; echo "$*").tar.gz" logs && rm -rf "$OUT/logs"
ls -la "$OUT"
