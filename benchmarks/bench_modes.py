"""Per JIT mode: compile time and median training step of the explorer engine.

The same RunConfig (2-layer GCN, hidden 16, dropout 0.5, Adam) in each of the
five modes, on Zachary's karate club (34 nodes: per-call Python overhead
dominates) and on a random graph with 10,000 nodes / 100,000 edges / 128
features (the compiled work dominates). Prints the table and the per-step
ratios nnx.jit / functional, cached_partial / functional and eager / functional.

"median step ms" is the engine's own time of the step call (``block_until_ready``);
"whole call ms" is ``Run.step()`` as the app and the CLI call it, per step: the step
plus the record the engine keeps of it (the eval-mode metrics, the host snapshot of
every variable for the change heatmap, the rollback checkpoint); "bookkeeping ms"
is the median of their difference, per step.

Usage (from the repository root)::

    python -m benchmarks.bench_modes [--steps N] [--eager-steps N] [--rounds R]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import machine_info, print_table, random_graph, versions
from explorer.config import LayerConfig, RunConfig
from explorer.engine import STEPPERS, Run
from explorer.sources import split_per_class
from gnncore import Graph


def large_graph() -> Graph:
    g = random_graph(10_000, 100_000, 128, 16, seed=0)
    train, val, test = split_per_class(g.y, 20, 0)
    return Graph.from_arrays(g.edge_index, g.x, y=g.y, train_mask=train, val_mask=val,
                             test_mask=test)


def measure_shape(config: RunConfig, graph: Graph | None, steps: int, eager_steps: int,
                  rounds: int) -> dict[str, dict]:
    """All five modes on one graph, timed in ``rounds`` that alternate between the
    modes, so that a slow patch of a noisy machine hits every mode alike."""
    runs, out = {}, {}
    for mode in STEPPERS:
        runs[mode] = run = Run(config.replace(mode=mode), graph)
        start = time.perf_counter()
        run.step()  # first call: trace + compile + one step
        out[mode] = {"first_s": time.perf_counter() - start}
    whole = {mode: [] for mode in runs}  # per call: (seconds per step, bookkeeping per step)
    for _ in range(rounds):
        for mode, run in runs.items():
            for _ in range(max(1, (eager_steps if mode == "eager" else steps) // rounds)):
                start = time.perf_counter()
                records = run.advance()  # what run.step() does (a scan call: K steps)
                seconds = (time.perf_counter() - start) / len(records)
                whole[mode].append((seconds, seconds - sum(r.wall_s for r in records)
                                    / len(records)))
    for mode, run in runs.items():
        walls = [r.wall_s for r in run.history[1:]]
        out[mode]["whole_ms"] = 1e3 * float(np.median([w for w, _ in whole[mode]]))
        out[mode]["bookkeeping_ms"] = 1e3 * float(np.median([b for _, b in whole[mode]]))
        breakdown = run.compile_breakdown() or {}
        out[mode].update(
            median_ms=1e3 * float(np.median(walls)), steps=len(walls),
            trace_lower_s=breakdown.get("trace_lower_s", float("nan")),
            compile_s=breakdown.get("compile_s", float("nan")),
            verdict=run.audit().verdict.status)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--eager-steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    print(machine_info())
    print(versions(["jax", "jaxlib", "flax", "optax", "numpy"]))
    config = RunConfig(layers=(LayerConfig("gcn", 16), LayerConfig("gcn", 16)), dropout=0.5)
    shapes = {"karate": None, "random 10k/100k": large_graph()}
    rows, ratios = [], []
    for shape, graph in shapes.items():
        results = measure_shape(config, graph, args.steps, args.eager_steps, args.rounds)
        for mode, r in results.items():
            rows.append([shape, mode, f"{r['first_s']:.3f}", f"{r['trace_lower_s']:.3f}",
                         f"{r['compile_s']:.3f}", f"{r['median_ms']:.3f}",
                         f"{r['whole_ms']:.3f}", f"{r['bookkeeping_ms']:.3f}",
                         r["steps"], r["verdict"]])
        print(f"  done {shape}", flush=True)
        base = results["functional"]["median_ms"]
        ratios.append([shape] + [f"{results[m]['median_ms'] / base:.2f}"
                                 for m in ("nnx.jit", "cached_partial", "eager", "jax.jit")])
    print("\nTraining step per JIT mode (median over the timed steps; first = trace + "
          "compile + one step)")
    print_table(["shape", "mode", "first call s", "trace+lower s", "XLA compile s",
                 "median step ms", "whole call ms", "bookkeeping ms", "timed steps",
                 "verdict"], rows)
    print("\nPer-step ratios against the functional loop (target on the large graph: "
          "nnx.jit and cached_partial <= 1.2)")
    print_table(["shape", "nnx.jit / functional", "cached_partial / functional",
                 "eager / functional", "jax.jit (frozen) / functional"], ratios)


if __name__ == "__main__":
    main()
