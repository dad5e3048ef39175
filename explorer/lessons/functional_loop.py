"""Lesson 4: The functional loop, and the stale-object window."""

from __future__ import annotations

import jax
from flax import nnx

from explorer.audit import compare_snapshots, snapshot
from explorer.engine import Run
from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import (
    FUNCTIONAL_CODE,
    KARATE,
)


def _functional(lesson: Lesson, sync: bool) -> Outcome:
    run = Run(lesson.setup.replace(mode="nnx.jit"))  # modules, batch and loss of the setup
    model, optimizer = run.model, run.optimizer
    before = snapshot(model, optimizer)
    graphdef, state = nnx.split((model, optimizer))

    @jax.jit
    def train_step(state, batch):
        m, opt = nnx.merge(graphdef, state)
        loss = run.train_step(m, opt, batch)
        return nnx.state((m, opt)), loss

    losses = []
    for _ in range(lesson.steps):
        state, loss = train_step(state, run.inputs)
        losses.append(float(loss))
    threaded = int(nnx.merge(graphdef, state)[1].step[...])  # a fresh copy: read only
    if sync:
        nnx.update((model, optimizer), state)
    changes = [c for c in compare_snapshots(before, snapshot(model, optimizer))
               if c.kind == "parameter"]
    moved, total = sum(c.changed for c in changes), len(changes)
    step = int(optimizer.step[...])
    trained = f"the loss fell from {losses[0]:.4f} to {losses[-1]:.4f}"
    if sync:
        return Outcome(
            "after nnx.update (the fix)", "UP TO DATE", True,
            f"Training worked ({trained}); after nnx.update the Python objects agree with "
            f"the state: {moved} of {total} parameters changed and optimizer.step is {step}.",
            (f"state's step counter: {threaded}", f"optimizer.step: {step}"),
            losses=tuple(losses),
            code=FUNCTIONAL_CODE + "\n\n# write the new state back into the objects\n"
                                    "nnx.update((model, optimizer), state)")
    return Outcome(
        "reading `model` before nnx.update", "STALE OBJECTS", False,
        f"Training worked ({trained}), but the Python `model` still holds its initial "
        f"weights: {moved} of {total} parameters differ from the start and optimizer.step "
        f"reads {step} while the threaded state's counter is {threaded}.",
        ("the new values live only in `state`",
         "evaluating or checkpointing `model` now would use the initial weights"),
        losses=tuple(losses),
        code=FUNCTIONAL_CODE + "\n\n# stale: only `state` holds the new values\n"
                                "evaluate(model)")


def _functional_pitfall(lesson, run):
    return _functional(lesson, sync=False)


def _functional_fix(lesson, run):
    return _functional(lesson, sync=True)


LESSON = Lesson(
    title="The functional loop, and the stale-object window",
    symptom="The parameter count below: the Python model still holds its initial weights.",
    explanation=("The functional loop splits the model once with `nnx.split`, and a pure "
                 "`jax.jit` step merges, updates and returns the new state — a correct fix for "
                 "frozen training that also skips nnx.jit's per-call graph walk. But the new "
                 "values live only in the returned `state`: until `nnx.update(model, state)` "
                 "the Python objects are stale, so evaluating or saving them silently uses old "
                 "weights."),
    fix_label="Apply the fix: nnx.update",
    pitfall=_functional_pitfall,
    fix=_functional_fix,
    setup=KARATE.replace(mode="functional"),
    fix_setup=KARATE.replace(mode="functional"),
)
