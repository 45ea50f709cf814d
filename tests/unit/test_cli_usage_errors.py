"""Usage errors and bad values are one line and exit 2 through the console script's entry point, before any GPU is
asked for (a fresh user's review, session 17: click's boxed panel, and 'NVML is not available' for a bad --gpu)."""

from __future__ import annotations

import pytest

from archline.cli.app import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["report", "--bogus"], "No such option: --bogus"),
        (["model", "predict", "--flops", "abc"], "Invalid value for '--flops'"),
        (["measure", "--gpu", "abc", "--", "true"], "--gpu must be an index"),
        (["monitor", "--gpu", "foo"], "--gpu must be an index"),
        (["monitor", "--prometheus", "99999"], "99999 is not a TCP port"),
        (["run", "--tracer", "foo", "--", "true"], "--tracer must be one of"),
        (["characterize", "--gpu", "abc"], "--gpu must be an index"),
        (["kernels", "--emit", "/proc/nope"], "--emit /proc/nope: cannot create the folder"),
        (["monitor", "--gpu", "-1"], "--gpu: -1 is not a GPU index"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(argv, capsys)
    assert code == 2 and says in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "╭" not in err


def test_help_and_version_still_exit_0_and_no_arguments_show_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--version"], capsys)
    assert code == 0 and out.startswith("archline ")
    code, out, _ = _run(["report", "--help"], capsys)
    assert code == 0 and "Usage: archline report" in out
    code, out, _ = _run([], capsys)
    assert code == 2 and out.count("Usage: archline") == 1  # once (it was printed twice)
    code, out, _ = _run(["fleet"], capsys)
    assert code == 2 and out.count("Usage: archline fleet") == 1


def test_a_commands_own_exit_status_passes_through(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`archline run`/`measure` pass the program's exit status on with typer.Exit(code), and Ctrl-C is 130: the entry
    point, which no longer lets click exit by itself, must keep both."""
    import typer

    import archline.cli.app as app_mod

    tiny = typer.Typer()

    @tiny.command()
    def child(code: int = 0, interrupt: bool = False) -> None:
        if interrupt:
            raise KeyboardInterrupt
        raise typer.Exit(code)

    @tiny.command()
    def other() -> None:  # two commands: the first argument names one, as archline's do
        return None

    monkeypatch.setattr(app_mod, "app", tiny)
    assert _run(["child", "--code", "7"], capsys)[0] == 7
    assert _run(["child"], capsys)[0] == 0
    assert _run(["child", "--interrupt"], capsys)[0] == 130
    assert _run(["other"], capsys)[0] == 0


def test_help_paragraphs_are_reflowed_not_broken_where_the_docstring_broke(capsys: pytest.CaptureFixture[str]) -> None:
    """Rich kept the docstrings' line breaks, so help sentences broke mid-phrase at 80 columns; each paragraph is now
    one line that the help wraps itself (blank lines still part paragraphs)."""
    from archline.cli.app import _reflow

    doc = "One line\n    and its rest.\n\n    Second\n    para."
    assert _reflow(doc) == "One line and its rest.\n\nSecond para."
    code, out, _ = _run(["kernels", "--help"], capsys)
    assert code == 0
    flat = " ".join(out.split())
    assert "whether it runs on --arch (the PTX target and ISA version it is built with) or why it is skipped" in flat
