"""How far a graph replay has got: its trials counted by kind, as progress lines (replay.py's trial hook)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

#: What each kind of trial measures (replay.py's ``what``), as a progress line names it.
PHASES = {
    "capture": "capturing the step as a CUDA graph",
    "step": "timing the whole step once",
    "busy": "tracing each kernel's busy time (CUPTI)",
    "timing": "timing each group",
    "design": "the design's configurations",
    "whole": "the whole step",
    "base": "the fixed cost (no group on)",
    "alone": "groups alone",
    "without": "groups switched off",
    "rest": "the rest",
}
#: Seconds between two lines while one kind of trial goes on (a new kind prints at once).
EVERY_S = 30.0


@dataclass
class ReplayProgress:
    """A trial hook for :func:`~archline.measurement.attribute.replay.run_replay` (``on_trial``): ``emit`` gets a line
    when a kind of trial starts for the first time and otherwise, as trials start, at most every ``every_s`` seconds
    of ``now()`` (kinds that alternate, such as the fixed cost measured between the groups alone, or the busy design
    model's trace after each configuration, do not print a line at every switch; a single trial that never ends
    prints nothing more: the replay's watchdog says where it stopped), e.g.
    ``replay: the design's configurations: 37 so far (212 s)``. A replay runs for minutes without other output; the
    lines say where it is, and where it stopped if it never ends."""

    now: Callable[[], float]
    emit: Callable[[str], None]
    every_s: float = EVERY_S
    counts: Counter[str] = field(default_factory=Counter)
    phase: str | None = None
    _t0: float | None = None
    _last: float = 0.0

    def __call__(self, group: str, what: str) -> None:
        t = self.now()
        if self._t0 is None:
            self._t0 = t
        first = what not in self.counts
        self.counts[what] += 1
        if first or t - self._last >= self.every_s:
            self.phase, self._last = what, t
            self.emit(self.line(t))

    def line(self, t: float) -> str:
        """The progress line at time ``t`` (s of ``now()``)."""
        what = self.phase or "?"
        done = self.counts[what]
        so_far = "" if what == "capture" else f": {done} so far"
        since = t - self._t0 if self._t0 is not None else 0.0
        return f"replay: {PHASES.get(what, what)}{so_far} ({since:.0f} s)"
