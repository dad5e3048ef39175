"""The cost of ``explorer.watch`` on a real training step (issue 15: ≤ 10 % of
a Cora GCN step with ``every=10``).

The engine's training step (``explorer.engine.recipe.train_step``: Kipf &
Welling's GCN on Cora, hidden 16, dropout 0.5, Adam) under ``nnx.jit``, called
bare and through ``explorer.watch`` with ``every=10`` and ``every=1``, each on
its own model and optimizer from the same seed. Blocks of ``--steps`` steps
alternate between the three for ``--rounds`` rounds (a slow patch of a noisy
machine hits all alike); each block ends with ``block_until_ready``, so a
block's time is the steps' real cost, dispatch included. Prints the median
time per step of each and the ratios watched / bare.

Usage (from the repository root)::

    python -m benchmarks.bench_watch [--steps 50] [--rounds 7]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np
from flax import nnx

import explorer
from benchmarks.common import load_average, machine_info, print_table, versions
from explorer.config import LayerConfig, RunConfig
from explorer.engine import Run, recipe

CONFIG = RunConfig(graph="cora", features="file", layers=(LayerConfig("gcn", 16),
                                                          LayerConfig("gcn", 16)),
                   dropout=0.5, learning_rate=0.01, weight_decay=5e-4, mode="nnx.jit")


def contestants() -> dict:
    """name -> (step callable, model, optimizer, inputs), each on its own run."""
    out = {}
    for name, every in (("bare", None), ("watch every=10", 10), ("watch every=1", 1)):
        run = Run(CONFIG)
        step = nnx.jit(recipe.train_step)
        if every is not None:
            step = explorer.watch(step, every=every, warn=False)
        out[name] = (step, run.model, run.optimizer, run.inputs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50, help="steps per timed block")
    parser.add_argument("--rounds", type=int, default=7, help="blocks per contestant")
    args = parser.parse_args()
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores; load average {load_average()}")
    print("versions:", ", ".join(f"{k} {v}" for k, v in versions(["jax", "flax"]).items()))
    runs = contestants()
    for step, model, optimizer, inputs in runs.values():  # compile and warm up
        for _ in range(12):
            loss = step(model, optimizer, inputs)
        jax.block_until_ready(loss)
    blocks = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, (step, model, optimizer, inputs) in runs.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                loss = step(model, optimizer, inputs)
            jax.block_until_ready((loss, nnx.state(model)))
            blocks[name].append((time.perf_counter() - start) / args.steps)
    bare = float(np.median(blocks["bare"]))
    rows = []
    for name, times in blocks.items():
        ms = 1e3 * float(np.median(times))
        rows.append([name, f"{ms:.3f}", f"{1e3 * min(times):.3f}",
                     f"{float(np.median(times)) / bare:.3f}"])
    print_table(["step", "median ms/step", "min ms/step", "ratio to bare"], rows,
                title=f"Cora GCN-16 under nnx.jit, {args.rounds} rounds x {args.steps} steps")
    watched = runs["watch every=10"][0]
    print(f"every=10 verdict: {watched.verdict.line()}")
    ratio = float(np.median(blocks["watch every=10"])) / bare
    print(f"target: watch every=10 / bare <= 1.10: {ratio:.3f} "
          + ("PASS" if ratio <= 1.10 else "MISS"))


if __name__ == "__main__":
    main()
