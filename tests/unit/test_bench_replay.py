"""benchmarks/validate_replay.py: the child-process harness (a lost or hung child costs one group, not the
step), and what it prints for a replay with groups that cannot be switched and repeats."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from archline.measurement.api import measure_callable
from archline.measurement.attribute.replay import replay_energy
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode
from tests.helpers.live_sensor import AveragingLiveSensor

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "validate_replay.py"


@pytest.fixture(scope="module")
def bench() -> Any:
    spec = importlib.util.spec_from_file_location("validate_replay", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_replay"] = mod
    spec.loader.exec_module(mod)
    return mod


class Launcher:
    """Plays the child: each call gives the next scripted (exit status, lines) and records the exclusions."""

    def __init__(self, script: list[tuple[int | None, list[str]]]) -> None:
        self.script, self.calls = list(script), []  # type: ignore[var-annotated]

    def __call__(self, exclude: Mapping[str, str], left_s: float) -> tuple[int | None, list[str]]:
        self.calls.append(dict(exclude))
        return self.script.pop(0)


RESULT = {"summary": {"step_energy_j": 1.0}, "rows": []}


def test_a_child_lost_in_a_groups_replay_is_restarted_without_that_group(bench: Any) -> None:
    launch = Launcher(
        [
            (
                -11,
                ["@@TRIAL timing conv", "@@TRIAL alone gemm", "RuntimeError: CUDA error: unspecified launch failure"],
            ),
            (None, ["@@TRIAL timing conv", "@@TRIAL without relu"]),
            (0, ["@@TRIAL whole [whole step]", "@@RESULT " + json.dumps(RESULT)]),
        ]
    )
    res = bench.run_workload(launch, lambda: 100.0, restarts=2)
    assert res["summary"] == RESULT["summary"] and res["attempts"] == 3
    assert launch.calls == [{}, {"gemm": res["excluded"]["gemm"]}, res["excluded"]]
    assert "exited -11: RuntimeError: CUDA error: unspecified launch failure" in res["excluded"]["gemm"]
    assert res["excluded"]["relu"].startswith("its replay (without) hung (killed for time)")


@pytest.mark.parametrize(
    ("script", "needle"),
    [
        (
            [(1, ["Traceback (most recent call last):", "GraphError: the step cannot be captured"])],
            "cannot be captured",
        ),
        ([(-6, ["@@TRIAL whole [whole step]"])], "during the whole replay of [whole step]"),
        ([(-6, ["@@TRIAL alone a"]), (-6, ["@@TRIAL alone b"])], "still failing after 1 restarts"),
    ],
)
def test_a_child_that_cannot_be_helped_is_one_line(bench: Any, script: Any, needle: str) -> None:
    res = bench.run_workload(Launcher(script), lambda: 100.0, restarts=1)
    assert needle in res["error"] and "\n" not in res["error"]
    line = bench.report("resnet50", res)
    assert len(line) == 1 and line[0].startswith("PASS/FAIL resnet50: ERROR")


def test_no_time_left_is_an_error_not_a_hang(bench: Any) -> None:
    launch = Launcher([(-6, ["@@TRIAL alone a"])])
    left = iter([100.0, 5.0])
    res = bench.run_workload(launch, lambda: next(left), restarts=3)
    assert res["error"] == "out of time before attempt 2" and list(res["excluded"]) == ["a"]


def test_run_child_keeps_every_line_and_echoes_the_others(bench: Any, tmp_path: Path, capsys: Any) -> None:
    code = "print('@@TRIAL alone g'); print('hello'); raise SystemExit(3)"
    rc, lines = bench.run_child([sys.executable, "-c", code], 60.0, tmp_path / "child.log")
    assert rc == 3 and lines == ["@@TRIAL alone g", "hello"]
    assert "| hello" in capsys.readouterr().out and "@@TRIAL" not in capsys.readouterr().out
    assert (tmp_path / "child.log").read_text() == "@@TRIAL alone g\nhello\n"
    assert bench.last_trial(lines) == ("alone", "g") and bench.last_error(lines) == "hello"


def test_report_of_a_step_with_refused_nodes_and_two_runs(bench: Any) -> None:
    nodes = [FakeNode("conv", 0.004, 600.0, cluster=(1, 2, 1)), FakeNode("norm", 0.0015, 350.0)]
    nodes += [FakeNode("relu", 0.0005, 300.0)]
    gpu = FakeGraphGPU(nodes, fixed_by=None)
    measure = functools.partial(
        measure_callable, sources=[AveragingLiveSensor(gpu)], sync=gpu.synchronize, clock=gpu.clock,  # type: ignore[list-item]
        target_rel_error=0.02, max_total_s=3.0,
    )  # fmt: skip
    res = replay_energy(gpu, measure, gpu.clock, top=1, marginal=True, repeats=2)
    # as the child prints it and the parent reads it back
    got = json.loads(json.dumps({"summary": res.summary(), "rows": [r.to_row() for r in res.rows]}))
    text = "\n".join(bench.report("resnet50", {**got, "excluded": {"relu": "its replay (alone) hung"}}))
    assert "== resnet50: nodes switched by 'toggle', 1 not switchable" in text
    assert "refused by toggle: node 0 conv" in text and "912" in text
    assert "conv: not measured (1 of 1 nodes cannot be switched off" in text
    assert "norm: " in text and "(runs " in text and "marginal" in text
    assert "sum of isolated" in text and "PASS/FAIL resnet50: run-to-run spread of" in text and "(two-sided)" in text
    assert "excluded after a lost child: {'relu'" in text
