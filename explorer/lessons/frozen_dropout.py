"""Lesson 2: Frozen dropout: one mask reused every step."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from flax import nnx

from explorer.engine import Run
from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import (
    KARATE,
    trained,
    training_outcome,
)


def dropout_masks(run: Run, draws: int = 4, width: int = 24) -> np.ndarray:
    """Masks drawn by (a copy of) the run's own Dropout layer, called ``draws``
    times under the run's JIT wrapper: ``[draws, width]`` of 0/1."""
    dropout = nnx.clone(run.model.dropout)  # a copy: the lesson must not touch the run

    def apply(layer, x):
        return layer(x)

    wrapped = run.stepper.jit(apply)  # as the run's mode compiles its step
    ones = jnp.ones((width,), jnp.float32)
    return np.stack([np.asarray(wrapped(dropout, ones) != 0, np.float32)
                     for _ in range(draws)])


def _rng_count(run: Run) -> int:
    run.sync()
    counts = [int(np.asarray(var.get_value())) for path, var in
              nnx.to_flat_state(nnx.state(run.model, nnx.RngCount))]
    return sum(counts)


def _dropout_outcome(run: Run, label: str, code: str) -> Outcome:
    masks = dropout_masks(run)
    same = all(np.array_equal(masks[0], m) for m in masks[1:])
    count = _rng_count(run)
    base = training_outcome(run, label, code)
    rows = tuple({"draw": i + 1, "units kept": int(m.sum()), "same as draw 1":
                  "yes" if np.array_equal(m, masks[0]) else "no"} for i, m in enumerate(masks))
    if same:
        summary = (f"The model's Dropout drew the same mask {len(masks)} times in a row and its "
                   f"RNG counter reads {count} after {len(base.losses)} steps: every step "
                   "drops the same units, and the loss is frozen too.")
    else:
        summary = (f"{len(masks)} draws gave {len({m.tobytes() for m in masks})} different "
                   f"masks; the dropout RNG counter advanced to {count} over "
                   f"{len(base.losses)} steps, so each step drops different units.")
    return dataclasses.replace(base, summary=summary, rows=rows,
                               matrix=tuple(tuple(m.tolist()) for m in masks),
                               good=not same and base.good,
                               verdict="SAME MASK" if same else "NEW MASK EACH STEP")


def _dropout_pitfall(lesson, run):
    return _dropout_outcome(trained(lesson, lesson.setup, run), "jax.jit (the pitfall)",
                            "dropout = nnx.Dropout(0.5, rngs=rngs)\n"
                            "# the RNG count advances on a traced\n"
                            "# copy and is dropped: same mask each call\n"
                            "jax.jit(lambda d, x: d(x))(dropout, x)")


def _dropout_fix(lesson, run):
    return _dropout_outcome(trained(lesson, lesson.fix_setup, run), "nnx.jit (the fix)",
                            "dropout = nnx.Dropout(0.5, rngs=rngs)\n"
                            "# the RNG count's update flows back out:\n"
                            "# a new mask every call\n"
                            "nnx.jit(lambda d, x: d(x))(dropout, x)")


LESSON = Lesson(
    title="Frozen dropout: one mask reused every step",
    symptom="The masks below: under jax.jit every draw drops the same units.",
    explanation=("Dropout draws its mask from an RNG stream whose counter lives in the module. "
                 "Under plain `jax.jit` the counter is advanced on the traced copy and dropped, so "
                 "every step starts from the same key and drops the same units — the model "
                 "trains (if at all) on one fixed sub-network. Under `nnx.jit` the counter moves "
                 "and each step gets a fresh mask."),
    fix_label="Apply the fix: nnx.jit",
    pitfall=_dropout_pitfall,
    fix=_dropout_fix,
    setup=KARATE.replace(dropout=0.5),
    fix_setup=KARATE.replace(dropout=0.5, mode="nnx.jit"),
    trains_in_explorer=True,
)
