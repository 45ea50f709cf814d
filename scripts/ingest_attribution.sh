#!/usr/bin/env bash
# Bring an attribution step's archives (scripts/device.sh attribution, as the device tool returns them) into the
# shipped results: the run set under results/<gpu>/<SET>/<NAME>-GPU-<uuid8>/ (nvidia-smi.csv beside it, HTML reports
# left out as .gitignore wants), the log under results/<gpu>/bench/attribution-real/<SET>-<NAME>-GPU-<uuid8>.log, and
# each raw CUPTI trace (large-…bin.gz) as .bin.xz in its run directory's raw/cupti/ (kept in the history only:
# commit it apart, then scripts/restore_traces.sh learns the commit, as docs/results.md says).
#
#   scripts/ingest_attribution.sh FILES_AT SET NAME [ARCHIVE]   e.g. /work/.device/5 attribution-s21 heldout-time-rule
#
# FILES_AT: the folder the device tool put the files in (results-<gpu>-attribution.tar.gz, logs-…tar.gz, large-*.gz).
# ARCHIVE: which archives of several (all, all2, … as device_bg.sh names them); the first by default. The board is
# the one the run's manifest names (on a host of several GPUs nvidia-smi.csv lists them all); a trace whose run is
# in another archive of the folder is left for that archive's ingest.
# ARCHLINE_RESULTS: where the shipped results are (results/ of this checkout by default).
set -eu
cd "$(dirname "$0")/.."
out=${ARCHLINE_RESULTS:-results}
src=${1:?FILES_AT}; set_name=${2:?SET, e.g. attribution-s21}; name=${3:?NAME, e.g. heldout-time-rule}
prefix=${4:+$4-}; prefix=${prefix:-*}
res=$(ls "$src"/${prefix}results-*-attribution.tar.gz 2>/dev/null | head -1)  # all-results-… from device_bg.sh
logs=$(ls "$src"/${prefix}logs-*-attribution.tar.gz 2>/dev/null | head -1)
n_res=$(ls "$src"/*results-*-attribution.tar.gz 2>/dev/null | wc -l)
[ -n "$res" ] && [ -n "$logs" ] || { echo "ingest: no results-*/logs-*-attribution.tar.gz in $src" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xzf "$res"
mkdir -p "$tmp/logs" && tar -C "$tmp" -xzf "$logs"
gpu=$(cd "$tmp" && ls -d */run 2>/dev/null | head -1 | cut -d/ -f1)
[ -n "$gpu" ] || { echo "ingest: $res holds no <gpu>/run/" >&2; exit 2; }
uuid=$(cat "$tmp/$gpu"/run/*/manifest.json 2>/dev/null | grep -oE '"uuid": *"GPU-[0-9a-f]{8}' | head -1 \
  | grep -oE 'GPU-[0-9a-f]{8}') || uuid=$(awk -F', ' 'NR == 2 {print $3}' "$tmp/logs/nvidia-smi.csv" | cut -c1-12)
case "$uuid" in GPU-*) ;; *) echo "ingest: no GPU UUID in the run's manifest or the logs' nvidia-smi.csv" >&2; exit 2 ;; esac
dest="$out/$gpu/$set_name/$name-$uuid"
[ -e "$dest" ] && { echo "ingest: $dest exists" >&2; exit 2; }
mkdir -p "$dest" "$out/$gpu/bench/attribution-real"
cp -r "$tmp/$gpu/run/." "$dest/"
find "$dest" -name '*.html' -delete
cp "$tmp/logs/nvidia-smi.csv" "$dest/"
cp "$tmp/logs/attribution.log" "$out/$gpu/bench/attribution-real/$set_name-$name-$uuid.log"
n=0
for f in "$src"/large-*.gz; do
  [ -f "$f" ] || continue
  # large-<gpu>_run_<run>_raw_cupti_cupti-<pid>-<t>.bin.gz ('+' or '_' for '/')
  base=$(basename "$f" .gz)
  trace=$(echo "$base" | grep -oE 'cupti-[0-9]+(-[0-9]+)?\.bin$') || continue
  run=$(echo "$base" | sed -E "s/^large-$gpu[+_]run[+_]//; s/[+_]raw[+_]cupti[+_].*$//")
  if [ ! -d "$dest/$run" ]; then
    [ "$n_res" -gt 1 ] && { echo "left for another archive: $(basename "$f")"; continue; }
    echo "ingest: $f names no run directory of $dest ($run)" >&2; exit 2
  fi
  mkdir -p "$dest/$run/raw/cupti" && gunzip -c "$f" | xz -9 >"$dest/$run/raw/cupti/$trace.xz"
  n=$((n + 1))
done
echo "$dest: $(find "$dest" -type f | wc -l) files, $n raw trace(s); log $out/$gpu/bench/attribution-real/$set_name-$name-$uuid.log"
