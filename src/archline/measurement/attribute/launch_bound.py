"""The launch-bound rule: a note for a traced program whose GPU mostly waited on kernel launches."""

from __future__ import annotations

from archline.measurement.attribute.design import GAP_NAMES
from archline.records.attribution import AttributionResult

__all__ = ["LAUNCH_BOUND_MIN_GAPS", "LAUNCH_BOUND_SHARE", "launch_bound_note"]

#: A program counts as launch-bound when its launch gaps fill this share of its span, over at least
#: LAUNCH_BOUND_MIN_GAPS gaps.
LAUNCH_BOUND_SHARE = 0.3
LAUNCH_BOUND_MIN_GAPS = 10_000


def launch_bound_note(
    result: AttributionResult | None, program_span: tuple[float, float] | None, *, duty_cycled: bool
) -> str | None:
    """A note for a fully traced program whose GPU mostly waited on kernel launches, which is where
    tracing slows a program down; None otherwise."""
    if result is None or program_span is None or duty_cycled:
        return None
    span = program_span[1] - program_span[0]
    gaps = [r for r in result.table if r.name == GAP_NAMES["launch"]]
    calls = sum(r.calls for r in gaps)
    busy = sum(r.time_s for r in gaps)
    if span <= 0 or calls < LAUNCH_BOUND_MIN_GAPS or busy < LAUNCH_BOUND_SHARE * span:
        return None
    return (
        f"launch-bound: the GPU waited between {calls} kernel launches for {100 * busy / span:.0f} % of the "
        "program; CUPTI's cost per launch slows such programs down (measured in docs/attribution.md); "
        "archline run --trace-duty 0.3/6 traces 5 % of the time instead"
    )
