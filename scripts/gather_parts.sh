#!/usr/bin/env bash
# Gather the archives of a plan's parts (scripts/plan_*.sh) into $OUT/all, within the device tool's limit of
# 8 files: each part's results archive and its large raw traces (renamed after the part), and every log
# archive and part log in one logs-all.tar.gz.
#
#   OUT=/dir scripts/gather_parts.sh PART [PART ...]      (each PART a folder of $OUT, with PART.log beside it)
set -u
OUT=${OUT:?set OUT}
mkdir -p "$OUT/all" "$OUT/logs-all"
for part in "$@"; do
  for f in "$OUT/$part"/results-*.tar.gz "$OUT/$part"/large-*.gz; do
    [ -f "$f" ] && cp "$f" "$OUT/all/$(basename "$f" | sed "s/^large-/large-$part-/;s/^results-/$part-results-/")"
  done
  for f in "$OUT/$part"/logs-*.tar.gz; do [ -f "$f" ] && cp "$f" "$OUT/logs-all/$part-$(basename "$f")"; done
  cp "$OUT/$part.log" "$OUT/logs-all/" 2>/dev/null
done
tar -C "$OUT" -czf "$OUT/all/logs-all.tar.gz" logs-all
ls -la "$OUT/all"
