"""What a lesson is and what one side of it shows (imports no JAX)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from explorer.config import RunConfig
    from explorer.engine import Run

__all__ = ["LESSON_STEPS", "Lesson", "Outcome"]

LESSON_STEPS = 10  # training steps of the lessons that train


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one side of a lesson (the pitfall or the fix) measured."""

    label: str  # the column's title, e.g. "jax.jit (the pitfall)"
    verdict: str  # a short word for the banner: FROZEN, TRAINING, ValueError, ...
    good: bool  # green (the fix works) or red (the symptom)
    summary: str  # one sentence with the measured numbers
    evidence: tuple[str, ...] = ()
    rows: tuple[dict, ...] = ()  # a small table
    losses: tuple[float, ...] = ()  # a loss curve, when the lesson trains
    matrix: tuple[tuple[float, ...], ...] = ()  # e.g. dropout masks, one row per draw
    code: str = ""  # the lines that produced this column


@dataclasses.dataclass(frozen=True, kw_only=True)
class Lesson:
    """One pitfall: what to look at, why it happens, and the fix.

    Arguments:
        title: the lesson's heading.
        symptom: where to look (one sentence).
        explanation: why it happens, in 2–4 sentences.
        fix_label: the "apply the fix" button's text.
        pitfall, fix: ``(lesson, run or None) -> Outcome``: run one side and
            report what it measured. Given a run (already trained on
            :attr:`setup` / :attr:`fix_setup`), they only observe it.
        setup, fix_setup: the explorer setup each side trains on (``None``: the
            side does not train in the explorer's panels).
        steps: training steps of a side that trains.
        trains_in_explorer: the sides are observed on the explorer's own run
            (trained in the app's panels, so the main charts show them too).
        measure: ``(lesson, rounds=...) -> measurement`` for a lesson whose two
            sides show the same quantities (timings): measured once, in
            interleaved rounds, and handed to ``pitfall`` and ``fix`` as a
            third argument, so that a number shown in both columns is the same
            number. (A rehearsal asks for one round: it only compiles.)
        key, number: filled in by :mod:`explorer.lessons` from its ``ORDER``.
    """

    title: str
    symptom: str
    explanation: str
    fix_label: str
    pitfall: Callable[[Lesson, Run | None], Outcome]
    fix: Callable[[Lesson, Run | None], Outcome]
    setup: RunConfig | None = None
    fix_setup: RunConfig | None = None
    steps: int = LESSON_STEPS
    trains_in_explorer: bool = False
    measure: Callable[[Lesson], object] | None = None
    key: str = ""
    number: int = 0

    def outcome(self, side: str, run: Run | None = None, memo: dict | None = None) -> Outcome:
        """Run the ``"pitfall"`` or the ``"fix"`` (or observe ``run``). ``memo``
        (a dict kept while the lesson is open) holds the lesson's measurement,
        so that both sides read the same one."""
        if side not in ("pitfall", "fix"):
            raise ValueError(f"side must be 'pitfall' or 'fix'; got {side!r}")
        if self.measure is None:
            return getattr(self, side)(self, run)
        memo = {} if memo is None else memo
        if "measured" not in memo:
            memo["measured"] = self.measure(self)
        return getattr(self, side)(self, run, memo["measured"])

    def rehearse(self, sides: tuple[str, ...] = ("pitfall", "fix")) -> None:
        """Run ``sides`` headless and throw the results away: the programs they
        compile (the explorer's run of each setup and its evaluation, what the
        side itself builds) land in the persistent compilation cache, so the
        real run reads them back instead of compiling (see
        ``explorer.compile_cache``; pointless without it). Its own models, no
        session state."""
        from explorer.workspace import Workspace

        # a timing lesson's rehearsal compiles what it times, in one round: its
        # numbers are thrown away, and a class may be waiting for it
        memo: dict = {} if self.measure is None else {"measured": self.measure(self, rounds=1)}
        for side in sides:
            config, run = self.setup_of(side), None
            if config is not None:  # as the explorer sets it up, so the same programs
                ws = Workspace()
                ws.load_setup(config)
                if ws.run is not None:
                    ws.run.warm_up().join()  # the page compiles its metrics for the setup
                    if self.trains_in_explorer:
                        for _ in range(self.steps):
                            ws.step()
                        run = ws.run
            self.outcome(side, run, memo)

    def setup_of(self, side: str) -> RunConfig | None:
        """The explorer setup the ``side`` trains on."""
        return self.setup if side == "pitfall" else self.fix_setup
