"""GPU smoke run of what a user sees: the Prometheus exporter scraped once, and archline measure's table and JSON.

Usage: python3 benchmarks/smoke_ux.py --out DIR [--quick]

Writes DIR/metrics.txt (one scrape of ``archline monitor --gpu all --prometheus``), DIR/measure.txt and
DIR/measure.json (``archline measure`` of a 3 s GPU-idle sleep: archline's energy next to the NVML counter's) and
DIR/summary.txt, and prints the figures. Each section fails on its own with a one-line error. About 20 s.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ARCHLINE = [sys.executable, "-m", "archline"]


def prometheus(out: Path, seconds: float) -> list[str]:
    """Start the exporter on a free port, scrape it once after a second, keep the text."""
    cmd = [*ARCHLINE, "monitor", "--gpu", "all", "--prometheus", "0", "--duration", str(seconds)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"http://[\d.]+:(\d+)/metrics", line)
        if m is None:
            raise RuntimeError(f"no exporter address in {line!r}: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(1.0)
        with urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        proc.wait(timeout=seconds + 30)
    (out / "metrics.txt").write_text(text)
    keep = ("archline_gpu_power_watts", "archline_gpu_energy_joules_total", "archline_gpu_sm_clock_hertz")
    return [ln for ln in text.splitlines() if ln.startswith(keep)]


def measure(out: Path, sleep_s: float) -> list[str]:
    """archline measure of a sleeping child: the table as printed, and the JSON figures."""
    child = ["--", sys.executable, "-c", f"import time; time.sleep({sleep_s})"]
    table = subprocess.run([*ARCHLINE, "measure", "--gpu", "0", *child], capture_output=True, text=True, check=False)
    (out / "measure.txt").write_text(table.stdout + table.stderr)
    js = subprocess.run([*ARCHLINE, "measure", "--gpu", "0", "--json", *child], capture_output=True, text=True)
    if js.returncode != 0:
        raise RuntimeError(js.stderr.strip().splitlines()[-1] if js.stderr.strip() else f"exit {js.returncode}")
    (out / "measure.json").write_text(js.stdout)
    d = json.loads(js.stdout)
    return [
        f"time {d['time_s']:.3f} s; energy {d['energy_j']} ± {d['energy_uncertainty_j']} J (archline), "
        f"{d['energy_counter_j']} ± {d['energy_counter_uncertainty_j']} J (NVML counter)",
        *table.stdout.splitlines(),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--quick", action="store_true", help="shorter runs (exporter 3 s, measured sleep 1 s)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    summary: list[str] = []
    failed = 0
    for name, fn, arg in (
        ("prometheus", prometheus, 3.0 if args.quick else 5.0),
        ("measure", measure, 1.0 if args.quick else 3.0),
    ):
        try:
            lines = fn(args.out, arg)
            summary += [f"[{name}]", *lines]
        except Exception as exc:  # one section's failure must not lose the other's figures
            failed += 1
            summary.append(f"[{name}] FAILED: {type(exc).__name__}: {exc}")
    text = "\n".join(summary) + "\n"
    (args.out / "summary.txt").write_text(text)
    print(text, end="")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
