"""benchmarks/replay_probe.py without a GPU: a child that does not end is a hang, and the summary counts them."""

from __future__ import annotations

import json
import subprocess
import sys
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

    def child(
        module: str,
        mode: str,
        group: str = "",
        kwargs: Any = None,
        timeout_s: float = 120.0,
        workspace_init: bool = True,
    ) -> Any:
        assert workspace_init  # replay's own rule unless --no-workspace-init
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


class FakeChild:
    """A walk's child: its lines in order; ``HANG`` stands for a trial that never ends (next() gives None, the child
    still running), the end of the list for the child's exit."""

    def __init__(self, lines: list[str], err: str = "") -> None:
        self.lines, self.err, self.ended, self.stopped = list(lines), err, False, False

    def next(self, timeout_s: float) -> str | None:
        if not self.lines:
            self.ended = True
            return None
        line = self.lines.pop(0)
        return None if line == "HANG" else line

    def stop(self) -> str:
        self.stopped = True
        return self.err


def _spawner(children: list[FakeChild], codes: list[str]) -> Any:
    def spawn(cmd: list[str]) -> FakeChild:
        codes.append(cmd[-1])
        return children.pop(0)

    return spawn


PLAN = 'plan {"mode": "rebuild", "groups": ["a", "w", "b"], "blocked": [], "memsets": 2, "kept_kernels": ["init"]}'


def test_a_walk_counts_a_group_that_does_not_end_as_a_hang_and_goes_on_after_it_in_a_new_child() -> None:
    probe = load_bench("replay_probe")
    first = FakeChild([PLAN, 'try "a"', 'ok "a"', 'try "w"', "HANG"])
    second = FakeChild([PLAN, 'try "b"', 'fail ["b", "switching failed"]', "done"])
    codes: list[str] = []
    seen: list[str] = []
    res = probe.walk(
        "train_resnet", {"arch": "vgg16"}, workspace_init=False, timeout_s=30.0, limit_s=600.0,
        spawn=_spawner([first, second], codes), now=lambda: 0.0, on_row=lambda r, _: seen.append(r["group"]),
    )  # fmt: skip
    assert res["hangs"] == ["w"] and res["alone_ok"] == 1 and res["errors"] == []
    assert res["complete"] and res["children"] == 2 and first.stopped and second.stopped
    assert [r["group"] for r in res["rows"]] == seen == ["a", "w", "b"]
    assert res["rows"][1]["detail"] == "HANG: did not end within 30 s"
    assert res["plan"]["kept_kernels"] == ["init"]
    # the second child skips what the first learnt; both are told to keep the memsets only; the code compiles
    assert 'json.loads(\'["a", "w"]\')' in codes[1] and "workspace_init=False" in codes[0]
    for code in codes:
        compile(code, "<walk>", "exec")


def test_a_walk_stops_when_a_child_learns_nothing_or_its_time_is_up() -> None:
    probe = load_bench("replay_probe")
    dead = FakeChild([], err="RuntimeError: CUDA error: out of memory")
    res = probe.walk("m", {}, workspace_init=True, timeout_s=5.0, limit_s=60.0, spawn=_spawner([dead], []))
    assert res["children"] == 1 and not res["complete"]
    assert res["rows"] == [
        {"group": "[capture]", "ok": False, "detail": "ERROR: RuntimeError: CUDA error: out of memory"}
    ]
    died = FakeChild([PLAN, 'try "a"'], err="torch.AcceleratorError: CUDA error: an illegal memory access")
    clock = iter([0.0, 10.0, 100.0, 100.0])  # the start, before the 2nd child, after "w" ended, the wall time
    late = FakeChild([PLAN, 'try "w"', 'ok "w"', 'try "b"', 'ok "b"'])
    res = probe.walk(
        "m", {}, workspace_init=True, timeout_s=5.0, limit_s=60.0, spawn=_spawner([died, late], []),
        now=lambda: next(clock),
    )  # fmt: skip
    assert res["errors"] == ["a"] and res["rows"][0]["detail"].startswith("ERROR: torch.AcceleratorError")
    # the limit is checked between trials: "w" ended at 100 s > 60 s, so "b" was never tried
    assert [r["group"] for r in res["rows"]] == ["a", "w"] and not res["complete"] and late.stopped


def test_the_walk_command_writes_its_json_and_names_the_hangs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = load_bench("replay_probe")
    real = probe.walk
    children = [FakeChild([PLAN, 'try "a"', 'ok "a"', 'try "w"', "HANG"]), FakeChild([PLAN, "done"])]

    def walk(*args: Any, **kw: Any) -> Any:
        return real(*args, **kw, spawn=_spawner(children, []), now=lambda: 0.0)

    monkeypatch.setattr(probe, "walk", walk)
    argv = ["--out", str(tmp_path), "--workload", "vgg16cl", "--walk", "--no-workspace-init", "--timeout-s", "30"]
    assert probe.main(argv) == 0
    saved = json.loads((tmp_path / "walk-vgg16cl-memsets.json").read_text())
    assert saved["hangs"] == ["w"] and saved["complete"] and saved["workspace_init"] is False
    out = capsys.readouterr().out
    assert "walk (memsets only): 1 of 3 groups alone ended well, 1 hung" in out and "hang: w" in out
    with pytest.raises(SystemExit) as exc:
        probe.main(["--out", str(tmp_path), "--walk", "--limit-s", "0"])
    assert exc.value.code == 2


def test_lines_reads_a_real_childs_lines_and_its_last_error_line() -> None:
    probe = load_bench("replay_probe")
    code = "import sys; print('plan {}', flush=True); sys.stderr.write('first\\nboom\\n')"
    child = probe.Lines([sys.executable, "-c", code])
    assert child.next(60.0) == "plan {}"
    assert child.next(60.0) is None and child.ended
    assert child.stop() == "boom"


def test_the_table_names_each_walks_board_and_hangs_and_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = load_bench("replay_probe")
    plan = {"mode": "rebuild", "groups": ["a", "w"], "blocked": [], "memsets": 3, "kept_kernels": []}
    walked = {"workload": "vgg16cl", "workspace_init": False, "plan": plan, "alone_ok": 1, "hangs": ["w"],
              "errors": [], "complete": True}  # fmt: skip
    old = tmp_path / "walk-old.json"  # before the walk recorded its board: the nvidia-smi.csv beside it names it
    old.write_text(json.dumps(walked))
    (tmp_path / "walk-old.nvidia-smi.csv").write_text(
        "index, name, uuid\n0, NVIDIA H100 80GB HBM3, GPU-5814e373-fa6b-c94c-bfa3-ee269a234a17\n"
    )
    new = tmp_path / "walk-new.json"
    board = {"name": "NVIDIA H200", "uuid": "GPU-0496e08b-ef25-b147-31ef-487df14dcb0b"}
    new.write_text(json.dumps({**walked, "workspace_init": True, "hangs": [], "alone_ok": 2, "complete": False,
                               "plan": {**plan, "kept_kernels": ["init"], "board": board}}))  # fmt: skip
    assert probe.main(["--table", str(old), str(new)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("GPU-5814e373 vgg16cl: memsets only kept on (0 set-up kernel nodes, switching rebuild)")
    assert out[0].endswith("1 of 2 groups alone ended well, 1 hung, 0 errors") and out[1] == "  hung: w"
    assert out[2].startswith("GPU-0496e08b vgg16cl: memsets and set-up kernels kept on (1 set-up kernel nodes")
    assert out[2].endswith("(cut short)")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert probe.main(["--table", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0]
    with pytest.raises(SystemExit) as exc:
        probe.main(["--walk"])
    assert exc.value.code == 2


def test_session_30s_docs_data_is_what_redo_s30_prints(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    walks = root / "results" / "h100" / "bench" / "replay-probe"
    s30 = root / "results" / "h100" / "attribution-s30"
    runs = [
        str(root / "results" / "h200" / "attribution-s30" / "transformer2k-GPU-0496e08b"),
        str(s30 / "vgg16cl-GPU-5814e373"),
        str(s30 / "vgg16cl-heldout-GPU-964cc302"),
    ]
    out = ["== replay_probe.py --table"]
    names = ["walk-vgg16cl-memsets-GPU-5814e373", "walk-vgg16cl-GPU-5814e373"]
    names += ["walk-vgg16cl-memsets-GPU-964cc302", "walk-vgg16cl-GPU-964cc302"]
    assert load_bench("replay_probe").main(["--table", *(str(walks / f"{n}.json") for n in names)]) == 0
    out += capsys.readouterr().out.splitlines()
    tools: list[tuple[str, list[str]]] = [("design_table", []), ("top10_table", []), ("design_power", [])]
    for tool, extra in [*tools, ("row_shares", ["--top", "6"])]:
        assert load_bench(tool).main([*extra, *runs]) == 0
        out += [f"== {tool}.py", *capsys.readouterr().out.splitlines()]
    assert out == (root / "docs" / "data" / "attribution_s30.txt").read_text().splitlines()
    text = "\n".join(out)
    # what the docs say of it: on both H100s the memsets-only walk hung on one weight-gradient group and the walk with
    # the set-up kernels kept on on none; VGG-16's attribution 0.2 % and 0.1 % within ±15 %
    hung = "  hung: sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize256x128x64_"
    assert text.count(hung) == 2 and text.count("48 of 48 groups alone ended well, 0 hung, 0 errors") == 2
    assert "GPU-0496e08b transformer2k skipped: the windows refuted the priors' spread" in text


def test_a_walk_starts_no_child_past_its_limit_and_names_a_hang_of_the_last_whole_step() -> None:
    probe = load_bench("replay_probe")
    hung = FakeChild([PLAN, 'try "a"', "HANG"])
    clock = iter([0.0, 700.0, 700.0])  # the start; the hang ended past the 600 s limit; the wall time
    res = probe.walk("m", {}, workspace_init=True, timeout_s=30.0, limit_s=600.0, spawn=_spawner([hung], []),
                     now=lambda: next(clock))  # fmt: skip
    assert res["hangs"] == ["a"] and res["children"] == 1 and not res["complete"]
    last = FakeChild([PLAN, 'try "a"', 'ok "a"', 'try "[whole step]"', "HANG"])
    codes: list[str] = []
    res = probe.walk("m", {}, workspace_init=True, timeout_s=30.0, limit_s=600.0,
                     spawn=_spawner([last, FakeChild([PLAN, "done"])], codes), now=lambda: 0.0)  # fmt: skip
    assert res["hangs"] == ["[whole step]"] and res["alone_ok"] == 1 and res["complete"] and res["children"] == 2
    assert 'json.loads(\'["a", "[whole step]"]\')' in codes[1]  # the second child skips the whole step too


def test_the_error_line_is_the_exception_not_the_advice_after_it() -> None:
    probe = load_bench("replay_probe")
    err = [
        "Traceback (most recent call last):",
        '  File "<string>", line 9, in <module>',
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        "CUDA kernel errors might be asynchronously reported at some other API call.",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "",
    ]
    assert probe.last_error(err) == "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
    assert probe.last_error(["just a line", "  "]) == "just a line" and probe.last_error([]) == ""


def test_a_child_writing_much_to_stderr_is_not_blocked_by_its_pipe() -> None:
    probe = load_bench("replay_probe")
    code = "import sys; sys.stderr.write('x' * 300000 + '\\n'); print('plan {}', flush=True); raise ValueError('late')"
    child = probe.Lines([sys.executable, "-c", code])
    assert child.next(60.0) == "plan {}"  # a child blocked on a full stderr pipe would never print it
    assert child.next(60.0) is None and child.ended
    assert child.stop() == "ValueError: late"


def test_the_walk_written_so_far_reads_as_a_walk_cut_short(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = load_bench("replay_probe")
    real, written = probe.walk, []
    children = [FakeChild([PLAN, 'try "a"', 'ok "a"', 'try "w"', "HANG"]), FakeChild([PLAN, "done"])]
    monkeypatch.setattr(probe, "walk", lambda *a, **kw: real(*a, **kw, spawn=_spawner(children, []), now=lambda: 0.0))
    monkeypatch.setattr(probe, "_write", lambda path, data: written.append(json.loads(json.dumps(data))))
    assert probe.main(["--out", str(tmp_path), "--workload", "vgg16cl", "--walk"]) == 0
    first = tmp_path / "first.json"  # as the file stood after the first row
    first.write_text(json.dumps(written[0]))
    capsys.readouterr()
    assert probe.main(["--table", str(first)]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert "(1 set-up kernel nodes, switching rebuild): 1 of 3 groups alone ended well, 0 hung" in line
    assert line.endswith("(cut short)") and written[-1]["complete"]


def test_a_child_that_raised_and_then_stuck_is_an_error_and_a_walk_past_its_limit_ends_its_last_group() -> None:
    probe = load_bench("replay_probe")
    stuck = FakeChild([PLAN, 'try "a"', "HANG"], err="RuntimeError: CUDA error: an illegal memory access")
    clock = iter([0.0, 700.0, 700.0, 700.0, 700.0])
    last = FakeChild([PLAN, 'try "w"', 'ok "w"', 'try "b"', 'ok "b"', 'try "[whole step]"', "done"])
    res = probe.walk("m", {}, workspace_init=True, timeout_s=30.0, limit_s=600.0, now=lambda: next(clock),
                     spawn=_spawner([stuck, FakeChild([PLAN, 'try "w"', 'ok "w"', "HANG"]), last], []))  # fmt: skip
    assert res["errors"] == ["a"] and res["hangs"] == [] and res["rows"][0]["detail"].startswith("ERROR: RuntimeError")
    # the clock passed the limit during "a": no second child was started
    assert res["children"] == 1 and not res["complete"]
    clock = iter([0.0, 700.0, 700.0, 700.0])
    res = probe.walk("m", {}, workspace_init=True, timeout_s=30.0, limit_s=600.0, now=lambda: next(clock),
                     spawn=_spawner([last], []))  # fmt: skip
    # past the limit after "w", but "a" and "b" are left: cut; after every group, the last whole step still runs
    assert [r["group"] for r in res["rows"]] == ["w"] and not res["complete"]
    done = FakeChild([PLAN.replace('["a", "w", "b"]', '["w"]'), 'try "w"', 'ok "w"', 'try "[whole step]"', "done"])
    clock = iter([0.0, 700.0, 700.0])
    res = probe.walk("m", {}, workspace_init=True, timeout_s=30.0, limit_s=600.0, now=lambda: next(clock),
                     spawn=_spawner([done], []))  # fmt: skip
    assert res["complete"] and res["alone_ok"] == 1


def test_the_exception_line_is_a_name_then_a_colon_or_nothing() -> None:
    probe = load_bench("replay_probe")
    assert probe.last_error(["NCCLError bar", "the end"]) == "the end"
    assert probe.last_error(["    raise RuntimeError(", "torch._dynamo.exc.Unsupported: x"]) == (
        "torch._dynamo.exc.Unsupported: x"
    )
    assert probe.last_error(["KeyboardInterrupt", "", "  "]) == "KeyboardInterrupt"
