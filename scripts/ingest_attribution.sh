#!/usr/bin/env bash
# Bring an attribution step's archives (scripts/device.sh attribution, as the device tool returns them) into the
# shipped results: the run set under results/<gpu>/<SET>/<NAME>-GPU-<uuid8>/ (nvidia-smi.csv beside it, HTML reports
# left out as .gitignore wants), the log under results/<gpu>/bench/attribution-real/<SET>-<NAME>-GPU-<uuid8>.log, and
# each raw CUPTI trace (large-…bin.xz, .gz before session 26) as .bin.xz in its run directory's raw/cupti/ (kept in the history only:
# commit it apart, then scripts/restore_traces.sh learns the commit, as docs/results.md says).
#
#   scripts/ingest_attribution.sh FILES_AT SET NAME [ARCHIVE]   e.g. /work/.device/5 attribution-s21 heldout-time-rule
#
# FILES_AT: the folder the device tool put the files in (results-<gpu>-attribution.tar.gz, logs-…tar.gz, large-*.xz).
# ARCHIVE: which archives, where the folder holds several (all, all2, … as device_bg.sh names them, '.' for those a
# plan's first step wrote unprefixed; required then).
# The board is the one the run set's manifests name (on a host of several GPUs nvidia-smi.csv lists them all). The
# raw traces are those the archive's own logs/large-files.txt lists (device.sh writes it), so two archives of the same
# workload on two GPUs each take their own.
# ARCHLINE_RESULTS: where the shipped results are (results/ of this checkout by default).
set -eu
export LC_ALL=C
cd "$(dirname "$0")/.."
out=${ARCHLINE_RESULTS:-results}
src=${1:?FILES_AT}; set_name=${2:?SET, e.g. attribution-s21}; name=${3:?NAME, e.g. heldout-time-rule}
n_res=$(ls "$src"/*results-*-attribution.tar.gz 2>/dev/null | wc -l)
if [ -z "${4:-}" ] && [ "$n_res" -gt 1 ]; then
  echo "ingest: $src holds $n_res attribution archives: name one (ARCHIVE: all, all2, ...)" >&2; exit 2
fi
case "${4:-}" in
  .) prefix= ;;  # the archives device.sh wrote in $OUT itself, unprefixed
  "") prefix='*' ;;
  *) prefix=$4- ;;
esac
res=$(ls "$src"/${prefix}results-*-attribution.tar.gz 2>/dev/null | head -1)  # all-results-… from device_bg.sh
logs=$(ls "$src"/${prefix}logs-*-attribution.tar.gz 2>/dev/null | head -1)
[ -n "$res" ] && [ -n "$logs" ] || { echo "ingest: no ${4:+$4-}results-*/logs-*-attribution.tar.gz in $src" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xzf "$res"
mkdir -p "$tmp/logs" && tar -C "$tmp" -xzf "$logs"
gpu=$(cd "$tmp" && ls -d */run 2>/dev/null | head -1 | cut -d/ -f1)
[ -n "$gpu" ] || { echo "ingest: $res holds no <gpu>/run/" >&2; exit 2; }
# the board: the one every manifest of the run set names; nvidia-smi.csv's only where it lists one GPU
uuids=$(cat "$tmp/$gpu"/run/*/manifest.json 2>/dev/null | grep -oE '"uuid": *"GPU-[0-9a-f]{8}' \
  | grep -oE 'GPU-[0-9a-f]{8}' | sort -u) || true
case $(echo "$uuids" | grep -c GPU-) in
  1) uuid=$uuids ;;
  0) [ "$(grep -c ', GPU-' "$tmp/logs/nvidia-smi.csv" 2>/dev/null)" = 1 ] || {
       echo "ingest: the run set's manifests name no board, and nvidia-smi.csv does not name just one" >&2; exit 2; }
     uuid=$(awk -F', ' 'NR == 2 {print $3}' "$tmp/logs/nvidia-smi.csv" | cut -c1-12) ;;
  *) echo "ingest: the run set's manifests name several boards: $(echo $uuids)" >&2; exit 2 ;;
esac
dest="$out/$gpu/$set_name/$name-$uuid"
[ -e "$dest" ] && { echo "ingest: $dest exists" >&2; exit 2; }
mkdir -p "$dest" "$out/$gpu/bench/attribution-real"
cp -r "$tmp/$gpu/run/." "$dest/"
find "$dest" -name '*.html' -delete
cp "$tmp/logs/nvidia-smi.csv" "$dest/"
cp "$tmp/logs/attribution.log" "$out/$gpu/bench/attribution-real/$set_name-$name-$uuid.log"
n=0
# logs/large-files.txt: "<gpu>/run/<run>/raw/cupti/cupti-<pid>-<t>.bin -> large-<same, '+' for '/'>.gz"; the device
# tool brings the file back with '_' for '+' (device_bg.sh renames it so)
while IFS= read -r line; do
  rel=${line%% -> *}; big=${line##* -> }
  case "$rel" in "$gpu"/run/*/raw/cupti/cupti-*.bin) ;; *) continue ;; esac
  f="$src/$big"; [ -f "$f" ] || f="$src/$(echo "$big" | tr '+' '_')"
  [ -f "$f" ] || { echo "ingest: the archive's trace $big was not brought back into $src" >&2; exit 2; }
  run=${rel#"$gpu"/run/}; run=${run%%/raw/cupti/*}
  [ -d "$dest/$run" ] || { echo "ingest: $big names no run directory of $dest ($run)" >&2; exit 2; }
  case "$f" in  # device.sh packs them with xz since session 26 (gzip before)
    *.xz) mkdir -p "$dest/$run/raw/cupti" && cp "$f" "$dest/$run/raw/cupti/$(basename "$rel").xz" ;;
    *) mkdir -p "$dest/$run/raw/cupti" && gunzip -c "$f" | xz -9 >"$dest/$run/raw/cupti/$(basename "$rel").xz" ;;
  esac
  n=$((n + 1))
done < <(cat "$tmp/logs/large-files.txt" 2>/dev/null || true)
echo "$dest: $(find "$dest" -type f | wc -l) files, $n raw trace(s); log $out/$gpu/bench/attribution-real/$set_name-$name-$uuid.log"
