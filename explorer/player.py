"""Live training: one run and its play state, as *generations* and *ticks*.

A tick runs a chunk of steps until a time budget is spent, then the UI
redraws. Every new run starts a new *generation*; a tick carrying an older
generation's token does nothing, so a timer that fires after a reset can
never write into the new run.
"""

from __future__ import annotations

import functools
import gc
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from explorer import engine

if TYPE_CHECKING:
    from explorer.engine import Run, StepRecord

__all__ = ["TICK_BUDGET_S", "Player", "release_memory"]

# A tick's training time; the redraw comes on top. Each redraw costs the browser
# 0.2-0.3 s of main-thread work on a 2-core machine, so fewer, longer ticks train
# faster and leave the page free for clicks (a click ends the tick early, see
# tick); but the canvas's live colours wait for the tick, so not too long.
TICK_BUDGET_S = 0.6


class Player:
    """The run being trained, its generation, and whether it plays.

    Arguments:
        tick_budget_s: how long one tick may train before returning.
    """

    def __init__(self, *, tick_budget_s: float = TICK_BUDGET_S):
        self.tick_budget_s = tick_budget_s
        self.steps_per_tick: int | None = None  # None: as many as fit the budget
        self.run: Run | None = None
        self.generation = 0  # bumped by every new run
        self.play_token = -1  # the generation Play was pressed in
        self.playing = False
        self.target_steps = 0

    def start(self, run: Run | None, target_steps: int) -> None:
        """A new generation with ``run`` (``None``: nothing to train), paused."""
        self.generation += 1
        self.playing = False
        self.target_steps = target_steps
        self.run = run

    def drop_run(self) -> None:
        """Let go of the run before a new one is built, so that its memory is
        back first. Reference counting frees it (a Run holds no reference
        cycle: explorer/engine/run.py), since the app turns Streamlit's
        per-rerun full ``gc.collect()`` off; :func:`release_memory` frees what
        is left and hands the heap back to the system."""
        self.run = None
        release_memory()

    @property
    def steps_done(self) -> int:
        return len(self.run.history) if self.run else 0

    @property
    def finished(self) -> bool:
        return self.steps_done >= self.target_steps

    def step(self) -> StepRecord:
        """One call of the training step (one step; in scan mode a whole call
        of K steps) and its last record; pauses live training. Raises
        :class:`TrainingStopped` (a NaN) or ``ValueError`` (and stops playing)."""
        self.playing = False
        return self._advance()[-1]

    def play(self, more_steps: int) -> int:
        """Start live training; returns the token that :meth:`tick` needs. When
        the target is reached, Play trains ``more_steps`` more."""
        if self.finished:
            self.target_steps = self.steps_done + more_steps
        self.playing = True
        self.play_token = self.generation
        return self.play_token

    def tick(self, token: int, interrupted: Callable[[], bool] | None = None
             ) -> tuple[int, Exception | None]:
        """Train one chunk: calls of the step until ``tick_budget_s`` is spent,
        the target is reached (then it stops playing), ``steps_per_tick`` steps
        ran, a call traced or was the run's first (its point shows at once:
        the first point is what a person waits for after Play), or ``interrupted()``
        (asked between calls; the UI passes "someone clicked") is true after
        the first call. In scan mode a call runs up to K steps, never past the
        target (nor past ``steps_per_tick``). A token from an earlier
        generation does nothing. Returns the number of steps run and the error
        that stopped training (a NaN), if one did."""
        if not self.playing or token != self.generation or self.run is None:
            return 0, None
        start = time.perf_counter()
        limit = self.steps_per_tick or math.inf
        done = 0
        first = self.steps_done == 0
        while self.playing and done < limit and not self.finished:
            room = min(limit - done, self.target_steps - self.steps_done)
            try:
                records = self._advance(None if math.isinf(room) else int(room))
            except (engine.TrainingStopped, ValueError) as err:
                return done, err
            done += len(records)
            if first or any(r.traced for r in records):  # show its point at once
                break
            if time.perf_counter() - start >= self.tick_budget_s:
                break
            if interrupted is not None and interrupted():
                break
        if self.finished:
            self.playing = False
        return done, None

    # ---------------------------------------------------------- diagnostics
    def change_matrix(self, last: int = 200):
        """``(paths, kinds, steps, matrix)`` of the per-step relative change of
        every variable over the last ``last`` steps (the heatmap's data)."""
        changes = self.run.changes[-last:] if self.run else []
        if not changes:
            return [], [], [], np.zeros((0, 0))
        paths = [c.path for c in changes[0]]
        kinds = [c.kind for c in changes[0]]
        first = len(self.run.changes) - len(changes) + 1
        matrix = np.array([[c.relative_change for c in step] for step in changes]).T
        return paths, kinds, list(range(first, first + len(changes))), matrix

    def retrace_info(self) -> dict:
        """Trace count and the cause of the last (re)trace."""
        run = self.run
        if run is None:
            return {"traces": 0, "last_cause": "", "last_step": None}
        last = next((r for r in reversed(run.history) if r.traced), None)
        return {"traces": run.trace_count, "last_cause": last.trace_cause if last else "",
                "last_step": last.step if last else None,
                "pending": run.pending_retrace if run.history else ""}

    def _advance(self, limit: int | None = None) -> list[StepRecord]:
        try:
            return self.run.advance(limit)
        except (engine.TrainingStopped, ValueError):
            self.playing = False
            raise


def release_memory() -> None:
    """Give a dropped run's memory back: a young-generation collection (the
    short-lived cycles that still pin some of its variables: flax's recursive
    flatten helpers leave one per state traversal; about 0.5 ms, against ~180
    ms for a full collection with JAX loaded), then, with glibc,
    ``malloc_trim`` so that the freed heap goes back to the system instead of
    staying in the process (measured on a Cora run: 25 ms, RSS 501 -> 425
    MB). Called when a run is replaced and when a session's workspace is
    freed; a tick never calls it."""
    gc.collect(1)
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    try:
        import ctypes
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: freed memory stays with the allocator
        return None
