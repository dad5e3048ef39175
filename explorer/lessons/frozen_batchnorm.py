"""Lesson 3: Frozen BatchNorm running statistics."""

from __future__ import annotations

import dataclasses

import numpy as np

from explorer.engine import Run
from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import (
    JAX_JIT_CODE,
    KARATE,
    NNX_JIT_CODE,
    trained,
    training_outcome,
)


def _bn_outcome(run: Run, label: str, code: str) -> Outcome:
    run.sync()
    norm = run.model.norms[0]
    mean, var = np.asarray(norm.mean[...]), np.asarray(norm.var[...])
    moved_mean = float(np.max(np.abs(mean)))
    moved_var = float(np.max(np.abs(var - 1.0)))
    base = training_outcome(run, label, code)
    rows = tuple({"channel": i, "running mean": round(float(mean[i]), 5),
                  "running var": round(float(var[i]), 5)} for i in range(min(6, len(mean))))
    frozen = moved_mean == 0.0 and moved_var == 0.0
    if frozen:
        summary = (f"After {len(base.losses)} steps the first BatchNorm's running mean is "
                   "still all zeros and its running variance all ones (their initial "
                   "values): evaluation would normalise with statistics of no data.")
    else:
        summary = (f"After {len(base.losses)} steps the first BatchNorm's running mean moved "
                   f"by up to {moved_mean:.4f} and its variance by up to {moved_var:.4f}: "
                   "evaluation uses statistics of the training graph.")
    return dataclasses.replace(base, summary=summary, rows=rows, good=not frozen,
                               verdict="STATS FROZEN" if frozen else "STATS UPDATED")


def _bn_pitfall(lesson, run):
    return _bn_outcome(trained(lesson, lesson.setup, run), "jax.jit (the pitfall)",
                       "# BatchNorm's running stats are updated\n"
                       "# in place by every training call\n"
                       "model = GNN(..., norm=\"batch\", rngs=rngs)\n\n"
                       + JAX_JIT_CODE.replace("updates a traced copy of the state...",
                                               "params and stats of a traced copy..."))


def _bn_fix(lesson, run):
    return _bn_outcome(trained(lesson, lesson.fix_setup, run), "nnx.jit (the fix)",
                       "# BatchNorm's running stats are updated\n"
                       "# in place by every training call\n"
                       "model = GNN(..., norm=\"batch\", rngs=rngs)\n\n"
                       + NNX_JIT_CODE)


LESSON = Lesson(
    title="Frozen BatchNorm running statistics",
    symptom="The running mean and variance of the first BatchNorm: still 0 and 1.",
    explanation=("BatchNorm keeps running averages of the batch statistics for evaluation, "
                 "updated in place on every training call. Under plain `jax.jit` those in-place "
                 "updates happen on a traced copy and vanish, so evaluation mode normalises with "
                 "the initial zeros and ones. With `nnx.jit` the statistics follow the data."),
    fix_label="Apply the fix: nnx.jit",
    pitfall=_bn_pitfall,
    fix=_bn_fix,
    setup=KARATE.replace(batch_norm=True, norm="batch"),
    fix_setup=KARATE.replace(batch_norm=True, norm="batch", mode="nnx.jit"),
    trains_in_explorer=True,
)
