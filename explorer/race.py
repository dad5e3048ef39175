"""The race: one configuration trained in every JIT mode from the same initial
weights on the same graph, with a timing row per mode.

Same ``config.seed`` means the same initial parameters in every mode, so the
loss curves differ only by what each mode does with the updates: all but one
overlap (up to float rounding) and ``jax.jit`` stays flat.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from explorer import engine
from explorer.config import RunConfig

if TYPE_CHECKING:
    from gnncore import Graph

__all__ = ["RaceEntry", "lane_label", "lanes", "race"]


@dataclasses.dataclass(frozen=True)
class RaceEntry:
    """One mode's lap (on ``devices`` devices): its loss curve, where its time
    went and its verdict."""

    mode: str
    losses: tuple[float, ...]
    trace_lower_s: float  # NaN for eager (nothing is compiled)
    compile_s: float
    first_call_s: float  # the first call as the loop saw it: trace + compile + run
    #: steady state: steps that hit the compiled cache (NaN when none did, e.g. a
    #: scan race no longer than one call)
    median_step_ms: float
    params_changed: int
    params_total: int
    verdict: str  # "training" or "frozen"
    final_test_acc: float
    stopped: str = ""  # why training stopped early (NaN loss), if it did
    peak_bytes: int | None = None  # XLA's peak memory of one compiled call
    donation_saves_bytes: int | None = None  # of that peak, with the state donated
    donation_note: str = ""  # why there is no donation figure ("" when there is)
    devices: int = 1

    @property
    def label(self) -> str:
        return lane_label(self.mode, self.devices)

    def row(self) -> dict:
        """A flat dict for tables and charts."""
        return {"mode": self.label, "devices": self.devices, "trace_lower_s": self.trace_lower_s,
                "compile_s": self.compile_s, "first_call_s": self.first_call_s,
                "steady_step_ms": self.median_step_ms, "peak_bytes": self.peak_bytes,
                "donation_saves_bytes": self.donation_saves_bytes,
                "params changed": f"{self.params_changed} of {self.params_total}",
                "final loss": self.losses[-1] if self.losses else math.nan,
                "test acc": self.final_test_acc, "verdict": self.verdict}


def lane_label(mode: str, devices: int) -> str:
    """A lane's name: the mode, and its device count when over one."""
    return mode if devices == 1 else f"{mode} × {devices} devices"


def lanes(config: RunConfig, modes: Sequence[str] | None = None) -> list[tuple[str, int]]:
    """The race's ``(mode, devices)`` lanes: every mode (or ``modes``) on one
    device, and, when ``config.devices`` is more, on that many too."""
    modes = tuple(engine.STEPPERS) if modes is None else tuple(modes)
    counts = sorted({1, config.devices})
    return [(mode, n) for mode in modes for n in counts]


def race(config: RunConfig, graph: Graph | None = None, *, steps: int | None = None,
         modes: Sequence[str] | None = None,
         progress: Callable[[str, int, int], None] | None = None) -> list[RaceEntry]:
    """Train ``config`` on ``graph`` for ``steps`` steps (default
    ``config.epochs``) in each of :func:`lanes` (``modes``: default every
    mode). ``progress(lane, done, total)`` is called before each lane and
    after the last one."""
    steps = steps or config.epochs
    todo = lanes(config, modes)
    entries = []
    for i, (mode, devices) in enumerate(todo):
        if progress:
            progress(lane_label(mode, devices), i, len(todo))
        run = engine.Run(config.replace(mode=mode, devices=devices), graph)
        stopped = ""
        try:
            run.train(steps)
        except engine.TrainingStopped as err:
            stopped = str(err)
        report = run.audit()
        breakdown = run.compile_breakdown() or {}
        params = [c for c in report.changes if c.kind == "parameter"]
        history = run.history
        entries.append(RaceEntry(
            mode=mode, losses=tuple(r.loss for r in history),
            trace_lower_s=breakdown.get("trace_lower_s", math.nan),
            compile_s=breakdown.get("compile_s", math.nan),
            first_call_s=history[0].call_wall_s if history else math.nan,
            median_step_ms=run.steady_step_ms(),
            params_changed=sum(c.changed for c in params), params_total=len(params),
            verdict=report.verdict.status,
            final_test_acc=history[-1].test_acc if history else math.nan,
            stopped=stopped, peak_bytes=breakdown.get("peak_bytes"),
            donation_saves_bytes=breakdown.get("donation_saves_bytes"),
            donation_note=breakdown.get("donation_note", run.stepper.donation_note),
            devices=devices))
    if progress:
        progress("", len(todo), len(todo))
    return entries
