"""benchmarks/replay_probe.py without a GPU: a child that does not end is a hang, and the summary counts them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.bench import load_bench


def test_a_child_killed_at_its_timeout_is_a_hang_and_its_workloads_keywords_reach_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probe = load_bench("replay_probe")
    seen: list[str] = []

    def run(cmd: list[str], **kw: Any) -> Any:
        seen.append(cmd[-1])
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    monkeypatch.setattr(probe.subprocess, "run", run)
    module, kwargs = probe.MODULES["vgg16cl"]
    assert probe.child(module, "alone", "g", kwargs, timeout_s=7.0) == (False, "HANG: did not end within 7 s")
    assert "make(\"cuda:0\", **{'batch': 64, 'channels_last': True, 'arch': 'vgg16'})" in seen[0]
    assert "__import__('train_resnet')" in seen[0]


def test_the_summary_counts_hangs_and_modes_are_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = load_bench("replay_probe")

    def child(module: str, mode: str, group: str = "", kwargs: Any = None, timeout_s: float = 120.0) -> Any:
        if mode == "list":
            return True, json.dumps({"wgrad": 3, "relu": 13})
        return (False, "HANG: did not end within 9 s") if group == "wgrad" else (True, "ok")

    monkeypatch.setattr(probe, "child", child)
    assert probe.main(["--out", str(tmp_path), "--workload", "vgg16cl", "--modes", "alone", "--timeout-s", "9"]) == 0
    summary = json.loads((tmp_path / "probe-vgg16cl.json").read_text())
    assert summary["hangs"] == 1 and summary["alone_ok"] == 1 and len(summary["rows"]) == 2
    assert summary["trials"] == summary["done"] == 2
    assert "FAIL alone    wgrad (3 nodes): HANG" in capsys.readouterr().out
    for bad in (["--modes", "alone,sideways"], ["--jobs", "0"], ["--timeout-s", "0"]):
        with pytest.raises(SystemExit) as exc:
            probe.main(["--out", str(tmp_path), *bad])
        assert exc.value.code == 2, bad
