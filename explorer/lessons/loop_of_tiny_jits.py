"""Lesson 16: Many tiny jitted calls, one jitted step, or K steps in one scan."""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import ROUNDS, Timing

K = 64  # training steps per timed block (and per scan)
LR = 0.05
WIDTHS = (8, *[16] * 7, 1)  # a small MLP: 8 layers, 16 parameter arrays


@functools.cache
def data() -> tuple:
    """``(x, y, params)``, made on the lesson's first run: JAX arrays made at
    import would start JAX's backend while the app imports its lessons, before
    its first page is drawn."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(64, 8)), jnp.float32)
    y = jnp.asarray(x @ rng.normal(size=(8, 1)), jnp.float32)
    params = {name: value for i, (a, b) in enumerate(zip(WIDTHS, WIDTHS[1:]))
              for name, value in ((f"w{i}", jnp.asarray(rng.normal(size=(a, b)) * 0.3,
                                                          jnp.float32)),
                                  (f"b{i}", jnp.zeros(b, jnp.float32)))}
    return x, y, params


def loss_fn(p, x, y):
    h = x
    for i in range(len(WIDTHS) - 1):
        h = h @ p[f"w{i}"] + p[f"b{i}"]
        if i < len(WIDTHS) - 2:
            h = jax.nn.relu(h)
    return jnp.mean((h - y) ** 2)


# the pitfall: every operation its own compiled call, glued together by Python
tiny_grad = jax.jit(jax.grad(loss_fn))
tiny_update = jax.jit(lambda w, g: w - LR * g)


def tiny_step(p, x, y):
    grads = tiny_grad(p, x, y)
    return {k: tiny_update(p[k], grads[k]) for k in p}  # one dispatch per array


@jax.jit
def one_step(p, x, y):
    grads = jax.grad(loss_fn)(p, x, y)
    return jax.tree.map(lambda w, g: w - LR * g, p, grads)


@jax.jit
def scanned(p, x, y):
    def body(p, _):
        return one_step.__wrapped__(p, x, y), None

    return lax.scan(body, p, None, length=K)[0]


def _measure(lesson: Lesson, rounds: int = ROUNDS) -> dict:
    """ms per training step of each way, ``K`` steps per block, in rounds."""
    x, y, params = data()
    ways = {"tiny jitted calls": lambda p: _loop(tiny_step, p, x, y),
            "one jitted step": lambda p: _loop(one_step, p, x, y),
            f"{K} steps in one lax.scan": lambda p: scanned(p, x, y)}
    for run in ways.values():  # compile outside the measurement
        jax.block_until_ready(run(params))
    per_round = {name: [] for name in ways}
    for _ in range(rounds):
        for name, run in ways.items():
            start = time.perf_counter()
            jax.block_until_ready(run(params))
            per_round[name].append(1e3 * (time.perf_counter() - start) / K)
    final = {name: float(loss_fn(run(params), x, y)) for name, run in ways.items()}
    return {"times": {n: Timing.of(v) for n, v in per_round.items()}, "loss": final}


def _loop(step, p, x, y):
    for _ in range(K):
        p = step(p, x, y)
    return p


def _rows(m: dict, names) -> tuple[dict, ...]:
    return tuple({"way": n, "ms per step": round(m["times"][n].median, 4),
                  "fastest–slowest round": f"{m['times'][n].low:.4f}–{m['times'][n].high:.4f}",
                  f"loss after {K} steps": round(m["loss"][n], 6)} for n in names)


def _pitfall(lesson, run, m):
    tiny = m["times"]["tiny jitted calls"]
    return Outcome(
        "tiny jitted calls in a Python loop", f"{tiny.median:.3f} ms / step", False,
        f"Jitting each small operation and gluing them with Python costs {tiny} per step "
        f"({K} steps, the median of {ROUNDS} rounds [fastest–slowest]): one dispatch per "
        "call and per parameter array, and no fusion between them.",
        rows=_rows(m, ["tiny jitted calls"]),
        code="grad = jax.jit(jax.grad(loss_fn))\nupdate = jax.jit(lambda w, g: w - lr * g)\n\n"
             "for _ in range(K):\n    g = grad(p, x, y)\n"
             "    p = {k: update(p[k], g[k]) for k in p}")


def _fix(lesson, run, m):
    t = m["times"]
    tiny, one, scan = t["tiny jitted calls"], t["one jitted step"], t[f"{K} steps in one lax.scan"]
    faster = one.faster_than(tiny)
    scan_text = (f"{K} steps in one lax.scan: {scan} per step, {one.times(scan)} faster than "
                 "the jitted step" if scan.faster_than(one) else
                 f"{K} steps in one lax.scan: {scan} per step, no clear difference from the "
                 "jitted step at this size")
    same = len({round(v, 4) for v in m["loss"].values()}) == 1
    return Outcome(
        "one jitted step, and a scan", "FEWER DISPATCHES" if faster else "NO CLEAR DIFFERENCE",
        faster,
        f"The whole step in one jax.jit: {one} per step, {tiny.times(one)} faster than the "
        f"tiny calls; {scan_text}. All three reach the same loss"
        + (" (same arithmetic, fewer trips from Python)." if same else "."),
        rows=_rows(m, list(t)),
        code="@jax.jit\ndef step(p, x, y):\n    g = jax.grad(loss_fn)(p, x, y)\n"
             "    return jax.tree.map(lambda w, g: w - lr * g, p, g)\n\n"
             "@jax.jit  # K steps, one call\ndef k_steps(p, x, y):\n"
             "    body = lambda p, _: (step(p, x, y), None)\n"
             "    return lax.scan(body, p, None, length=K)[0]")


LESSON = Lesson(
    title="Many tiny jitted calls, one jitted step, or K steps in one scan",
    symptom="The ms per step of each way, on the same tiny model.",
    explanation=("Each call of a jitted function costs a dispatch from Python, and XLA can only "
                 "fuse what is inside one compiled program. Jitting every small operation "
                 "separately pays the dispatch many times per step and fuses nothing. Jit the "
                 "whole step; for small models, `lax.scan` runs K steps in one call (the "
                 "explorer's `scan` JIT mode trains its model that way)."),
    fix_label="Apply the fix: one step, or a scan",
    pitfall=_pitfall,
    fix=_fix,
    measure=_measure,
)
