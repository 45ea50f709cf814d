#!/usr/bin/env bash
# Run scripts/device.sh steps detached on the lent machine, so that a job longer than one call's
# limit goes on between calls (the machine keeps a detached process while it stays warm).
#
#   scripts/device_bg.sh start WAIT_S STEP [STEP ...]   start the steps, then wait up to WAIT_S
#   scripts/device_bg.sh start WAIT_S plan_X             the same with scripts/plan_X.sh
#   scripts/device_bg.sh wait WAIT_S                     wait up to WAIT_S more
#
# Either call prints the running step's last lines; once the steps have ended it copies their
# archives into $OUT (the device tool brings back what is there). Environment as device.sh's.
set -u
work=${ARCHLINE_BG:-/tmp/archline-bg}
here=$(cd "$(dirname "$0")/.." && pwd)
verb=${1:?start or wait}; wait_s=${2:?seconds to wait}; shift 2
if [ "$verb" = start ]; then
  rm -rf "$work"; mkdir -p "$work/out"
  # a copy of this checkout: a later call re-sends the working tree under the running job
  cp -a "$here" "$work/src"
  # its own process session, so the job outlives this call
  # a first argument plan_X names scripts/plan_X.sh, run instead of device.sh
  setsid bash -c 'cd "$1/src" || exit; if [ -f "scripts/$2.sh" ] && [[ $2 == plan_* ]]; then c=("scripts/$2.sh"); else c=(scripts/device.sh "${@:2}"); fi
    OUT="$1/out" "${c[@]}" >"$1/driver.log" 2>&1; echo $? >"$1/rc"' bg "$work" "$@" </dev/null >/dev/null 2>&1 &
fi
t0=$(date +%s)
while [ ! -f "$work/rc" ] && [ $(( $(date +%s) - t0 )) -lt "$wait_s" ]; do sleep 5; done
echo "=== driver log"; tail -n 40 "$work/driver.log" 2>/dev/null
for f in "$work"/out/logs/*.log "$work"/out/*/logs/*.log; do [ -f "$f" ] && { echo "=== $f (last lines)"; tail -n 6 "$f"; }; done
if [ -f "$work/rc" ]; then
  echo "=== done, rc=$(cat "$work/rc")"
  cp "$work"/out/*.tar.gz "$work/driver.log" "${OUT:?}/" 2>/dev/null
  # further device.sh calls write under out/all, out/all2, ...: their archives have the same names, so they come
  # back as all-*, all2-*, ...
  for d in "$work"/out/all*/; do
    for f in "$d"*.tar.gz; do [ -f "$f" ] && cp "$f" "$OUT/$(basename "$d")-$(basename "$f")"; done
  done
  # the device tool brings back no file whose name has a '+': the large files come back with '_' instead
  for f in "$work"/out/large-*.[gx]z "$work"/out/all*/large-*.[gx]z; do
    [ -f "$f" ] && cp "$f" "$OUT/$(basename "$f" | tr '+' '_')"
  done
  ls -la "$OUT"
else
  echo "=== still running after ${wait_s} s"
fi
