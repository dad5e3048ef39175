"""Per JIT mode: compile time and median training step of the explorer engine.

The same RunConfig (2-layer GCN, hidden 16, dropout 0.5, Adam) in each of the
five modes, on Zachary's karate club (34 nodes: per-call Python overhead
dominates) and on a random graph with 10,000 nodes / 100,000 edges / 128
features (the compiled work dominates). Prints the table and the per-step
ratios nnx.jit / functional, cached_partial / functional and eager / functional.

Usage::

    python benchmarks/bench_modes.py [--steps N] [--eager-steps N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_info, print_table, random_graph, versions  # noqa: E402

from explorer.config import JIT_MODES, LayerConfig, RunConfig  # noqa: E402
from explorer.engine import Run  # noqa: E402
from explorer.sources import split_per_class  # noqa: E402
from gnncore import Graph  # noqa: E402


def large_graph() -> Graph:
    g = random_graph(10_000, 100_000, 128, 16, seed=0)
    train, val, test = split_per_class(g.y, 20, 0)
    return Graph.from_arrays(g.edge_index, g.x, y=g.y, train_mask=train, val_mask=val,
                             test_mask=test)


def measure(config: RunConfig, graph: Graph | None, steps: int) -> dict:
    run = Run(config, graph)
    start = time.perf_counter()
    run.step()
    first = time.perf_counter() - start
    for _ in range(steps):
        run.step()
    walls = [r.wall_s for r in run.history[1:]]
    breakdown = run.compile_breakdown() or {}
    return {"first_s": first, "median_ms": 1e3 * float(np.median(walls)),
            "trace_lower_s": breakdown.get("trace_lower_s", float("nan")),
            "compile_s": breakdown.get("compile_s", float("nan")),
            "verdict": run.audit().verdict.status}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eager-steps", type=int, default=5)
    args = parser.parse_args()
    print(machine_info())
    print(versions(["jax", "jaxlib", "flax", "optax", "numpy"]))
    config = RunConfig(layers=(LayerConfig("gcn", 16), LayerConfig("gcn", 16)), dropout=0.5)
    shapes = {"karate": None, "random 10k/100k": large_graph()}
    rows, ratios = [], []
    for shape, graph in shapes.items():
        results = {}
        for mode in JIT_MODES:
            steps = args.eager_steps if mode == "eager" else args.steps
            results[mode] = r = measure(config.replace(mode=mode), graph, steps)
            rows.append([shape, mode, f"{r['first_s']:.3f}", f"{r['trace_lower_s']:.3f}",
                         f"{r['compile_s']:.3f}", f"{r['median_ms']:.3f}", r["verdict"]])
            print(f"  done {shape} {mode}", flush=True)
        base = results["functional"]["median_ms"]
        ratios.append([shape] + [f"{results[m]['median_ms'] / base:.2f}"
                                 for m in ("nnx.jit", "cached_partial", "eager", "jax.jit")])
    print("\nTraining step per JIT mode (median over the timed steps; first = trace + "
          "compile + one step)")
    print_table(["shape", "mode", "first call s", "trace+lower s", "XLA compile s",
                 "median step ms", "verdict"], rows)
    print("\nPer-step ratios against the functional loop (target on the large graph: "
          "nnx.jit and cached_partial <= 1.2)")
    print_table(["shape", "nnx.jit / functional", "cached_partial / functional",
                 "eager / functional", "jax.jit (frozen) / functional"], ratios)


if __name__ == "__main__":
    main()
