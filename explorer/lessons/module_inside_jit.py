"""Lesson 14: A module built inside the traced function."""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import loss_outcome

STEPS = 6


@functools.cache
def data() -> tuple:
    """``(x, y)``, made on the lesson's first run, not at import (JAX arrays made
    at import would start JAX's backend before the app's first page is drawn)."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(32, 4)), jnp.float32)
    return x, jnp.asarray(x @ rng.normal(size=(4, 1)), jnp.float32)


def loss_fn(model, x, y):
    return jnp.mean((model(x) - y) ** 2)


def _pitfall(lesson, run):
    @nnx.jit
    def train_step(x, y):
        model = nnx.Linear(4, 1, rngs=nnx.Rngs(0))  # built here: new weights every call
        optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
        loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
        optimizer.update(model, grads)  # trains a model that is dropped on return
        return loss

    x, y = data()
    losses = tuple(float(train_step(x, y)) for _ in range(STEPS))
    return Outcome(
        "the model built inside nnx.jit", "NOTHING LEARNED", False,
        f"The loss reads {losses[0]:.6f} at every one of {STEPS} calls: each call builds a "
        "fresh model from the same seed, takes one step on it and throws it away with its "
        "update. No error, no learning.", losses=losses,
        code="@nnx.jit\ndef train_step(x, y):\n    model = nnx.Linear(4, 1, rngs=rngs)\n"
             "    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)\n"
             "    grads = nnx.grad(loss_fn)(model, x, y)\n"
             "    optimizer.update(model, grads)  # lost\n    return loss_fn(model, x, y)")


def _fix(lesson, run):
    model = nnx.Linear(4, 1, rngs=nnx.Rngs(0))  # built once, outside
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer, x, y):
        loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
        optimizer.update(model, grads)
        return loss

    x, y = data()
    losses = tuple(float(train_step(model, optimizer, x, y)) for _ in range(STEPS))
    return loss_outcome(
        "the model built once, passed in", losses,
        "Built once outside and passed to the step, the same model keeps its updates",
        code="model = nnx.Linear(4, 1, rngs=rngs)  # once\n"
             "optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)\n\n@nnx.jit\n"
             "def train_step(model, optimizer, x, y):\n"
             "    grads = nnx.grad(loss_fn)(model, x, y)\n"
             "    optimizer.update(model, grads)\n    return loss_fn(model, x, y)")


LESSON = Lesson(
    title="A module built inside the traced function",
    symptom="The loss curve: the same value at every call.",
    explanation=("Everything created inside a jitted function lives for one call. A model "
                 "built there starts from the same initial weights every call, takes one step "
                 "and is thrown away with what it learned. Build the model and the optimizer "
                 "once, outside, and pass them in (`nnx.jit` carries their updates back out)."),
    fix_label="Apply the fix: build it outside",
    pitfall=_pitfall,
    fix=_fix,
)
