"""What one edit of the drawing costs the engine before the next step: the
canvas's *add node* and *add edge* on karate club (``Workspace.add_node`` /
``add_edge``: the graph rebuilt, its arrays copied to the device, a new run),
two ways:

- **to_device**: gnncore's host-to-device copy (``gnncore.to_device``, what the
  library and the engine use);
- **jnp.array** (the peer): the same arrays through ``jnp.array``, as gnncore
  did before; in jax 0.10 it compiles a small program for every new shape.

Each arm runs in a fresh child process (no compilation cache), the arms
alternating, ``--rounds`` of each: every edit makes sizes its process has not
seen (a new node, then an edge to it), so it pays what a person's edit pays.
Printed per arm: the median and max wall time of each edit kind over all its
rounds, and the programs lowered per edit (JAX's monitoring events). The step
after an edit (it recompiles for the new shapes in either arm) is not part of
the figure.

Usage (from the repository root)::

    python -m benchmarks.bench_edit [--rounds 3] [--edits 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from benchmarks.common import load_average

ARMS = ("to_device", "jnp.array")
KINDS = ("add node", "add edge")
# the modules that copy host arrays with gnncore.to_device, by name
_COPIERS = ("gnncore.sparse", "gnncore.graph", "gnncore.batch", "gnncore.utils",
            "explorer.engine.tasks")


def child(arm: str, edits: int) -> dict:
    """One arm in this process: ``edits`` of each kind; times (s) and programs."""
    import importlib

    import jax.numpy as jnp
    from jax import monitoring

    import gnncore  # noqa: F401  (its XLA flag before JAX starts)
    from explorer.workspace import Workspace

    if arm == "jnp.array":
        for name in _COPIERS:
            importlib.import_module(name).to_device = jnp.array
    lowered = [0]

    def listen(event, *a, **k):
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowered[0] += 1

    monitoring.register_event_duration_secs_listener(listen)
    ws = Workspace()
    ws.step()  # the first run's compiles, out of the way
    out = {kind: {"s": [], "programs": []} for kind in KINDS}
    for i in range(edits):
        for kind in KINDS:
            lowered[0] = 0
            t0 = time.perf_counter()
            if kind == "add node":
                new = ws.add_node()
            else:
                ws.add_edge(new, i)
            out[kind]["s"].append(time.perf_counter() - t0)
            out[kind]["programs"].append(lowered[0])
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="child processes per arm")
    p.add_argument("--edits", type=int, default=10, help="edits of each kind per child")
    p.add_argument("--child", choices=ARMS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.edits)))
        return

    runs = {arm: {kind: {"s": [], "programs": []} for kind in KINDS} for arm in ARMS}
    for _ in range(args.rounds):
        for arm in ARMS:
            proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_edit", "--child", arm,
                                   "--edits", str(args.edits)],
                                  capture_output=True, text=True, check=True)
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            for kind in KINDS:
                for key in ("s", "programs"):
                    runs[arm][kind][key] += got[kind][key]
    print(f"load average {load_average()}; karate club, {args.rounds} child processes per arm "
          f"(alternating), {args.edits} edits of each kind in each")
    print(f"{'edit':<10}{'copy':<11}{'median ms':>10}{'max ms':>9}{'programs/edit':>15}")
    for kind in KINDS:
        for arm in ARMS:
            r = runs[arm][kind]
            print(f"{kind:<10}{arm:<11}{1e3 * statistics.median(r['s']):>10.1f}"
                  f"{1e3 * max(r['s']):>9.1f}{statistics.mean(r['programs']):>15.1f}")
    for kind in KINDS:
        a, b = (statistics.median(runs[arm][kind]["s"]) for arm in ARMS)
        print(f"{kind}: to_device / jnp.array = {a / b:.2f}")


if __name__ == "__main__":
    main()
