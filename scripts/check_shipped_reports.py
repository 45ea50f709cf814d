"""Rebuild every shipped run's report with this archline and compare it with the committed one.

    python3 scripts/check_shipped_reports.py [results]

Each run directory with a manifest is copied to a temporary place and rendered with
``archline report``; its Markdown reports are compared line by line with the committed ones,
ignoring the line that names the run directory's path. Prints one line per report and exits 1
if any report differs or fails to render (a refactoring that changes no behaviour passes).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPORTS = ("report.md", "roofline.md")


def _lines(path: Path, *dirs: Path) -> list[str]:
    return [ln for ln in path.read_text(encoding="utf-8").splitlines() if not any(str(d) in ln for d in dirs)]


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "results")
    bad = 0
    with tempfile.TemporaryDirectory(prefix="archline-check-") as tmp:
        for manifest in sorted(root.rglob("manifest.json")):
            run = manifest.parent
            committed = [run / r for r in REPORTS if (run / r).is_file()]
            if not committed:
                continue
            copy = Path(tmp) / "_".join(run.parts)
            shutil.copytree(run, copy)
            res = subprocess.run(
                [sys.executable, "-m", "archline", "report", str(copy)], capture_output=True, text=True, check=False
            )
            if res.returncode != 0:
                bad += 1
                print(f"FAIL  {run}: {res.stderr.strip().splitlines()[-1:]}")
                continue
            for old in committed:
                new = copy / old.name
                a, b = _lines(old, run, copy), _lines(new, run, copy) if new.is_file() else []
                same = a == b
                bad += not same
                n = sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))
                print(f"{'same ' if same else 'DIFF '} {old} ({n} differing lines besides the path)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
