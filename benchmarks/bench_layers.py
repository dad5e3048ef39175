"""Full-training-step benchmark: gnncore vs JraphX vs PyTorch Geometric on CPU.

For each shape and model, every framework trains the same architecture on the
same graph (same edge list, sorted by target): forward + backward + Adam update.
JAX frameworks use one functional ``jax.jit`` step (``nnx.split`` outside,
``nnx.merge`` inside); PyG uses eager torch with ``torch.optim.Adam``.

Usage::

    python benchmarks/bench_layers.py            # full run (~5-10 min on 2 cores)
    python benchmarks/bench_layers.py --quick    # short smoke run
    python benchmarks/bench_layers.py --only gnncore,jraphx --models gcn --shapes cora

Reported per row: first call (trace + compile + one step, JAX only), compile
(= first call - median step), the AOT breakdown of a second, fresh jit of the
same step (trace+lower and XLA compile), the median and min step time, and the
loss before and after the timed steps (a sanity check that the step trains).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    GraphData,
    machine_info,
    median_ms,
    print_table,
    shapes,
    timeit,
    versions,
)

FRAMEWORKS = ("gnncore", "jraphx", "pyg", "pyg1")
# "pyg" runs torch with torch.set_num_threads(os.cpu_count()) (or --torch-threads);
# "pyg1" is the same model with one torch thread: on a shared, loaded machine
# torch's OpenMP threads can wait on each other, and one thread is then faster.
MODELS = ("gcn", "gat", "sage")
HIDDEN = 64
GAT_HEADS = 8
LR = 1e-2
SPARSE_X_MAX_DENSITY = 0.05  # below this, gnncore takes the features as CSR


# ---------------------------------------------------------------- JAX side
def _jax_step_factory(graphdef):
    """A fresh jitted training step (new function object, so nothing is cached)."""
    import jax
    import optax
    from flax import nnx

    def step(state, x, edge_index, y):
        model, optimizer = nnx.merge(graphdef, state)

        def loss_fn(m):
            logits = m(x, edge_index)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    return jax.jit(step)


def build_gnncore(kind: str, g: GraphData, seed: int):
    from flax import nnx

    from gnncore import GCN, GNN, ConvSpec, GraphSAGE

    rngs = nnx.Rngs(seed)
    F, C = g.num_features, g.num_classes
    if kind == "gcn":
        return GCN(F, HIDDEN, C, num_layers=2, dropout=0.0, rngs=rngs)
    if kind == "gat":
        # 8 heads x 8 per head, concatenated; output layer: 1 head, averaged.
        return GNN(F, [ConvSpec("gat", HIDDEN, {"heads": GAT_HEADS}),
                       ConvSpec("gat", C, {"heads": 1, "concat": False})],
                   activation="elu", dropout=0.0, rngs=rngs)
    if kind == "sage":
        return GraphSAGE(F, HIDDEN, C, num_layers=2, dropout=0.0, aggr="mean", rngs=rngs)
    raise ValueError(kind)


def build_jraphx(kind: str, g: GraphData, seed: int):
    import jax
    from flax import nnx
    from jraphx.nn.conv import GATConv, GCNConv, SAGEConv

    rngs = nnx.Rngs(seed)
    F, C = g.num_features, g.num_classes

    class TwoLayer(nnx.Module):
        def __init__(self, c1, c2, act):
            self.c1, self.c2, self.act = c1, c2, act

        def __call__(self, x, edge_index):
            return self.c2(self.act(self.c1(x, edge_index)), edge_index)

    if kind == "gcn":
        return TwoLayer(GCNConv(F, HIDDEN, rngs=rngs), GCNConv(HIDDEN, C, rngs=rngs),
                        jax.nn.relu)
    if kind == "gat":
        return TwoLayer(GATConv(F, HIDDEN // GAT_HEADS, heads=GAT_HEADS, rngs=rngs),
                        GATConv(HIDDEN, C, heads=1, concat=False, rngs=rngs), jax.nn.elu)
    if kind == "sage":
        return TwoLayer(SAGEConv(F, HIDDEN, aggr="mean", rngs=rngs),
                        SAGEConv(HIDDEN, C, aggr="mean", rngs=rngs), jax.nn.relu)
    raise ValueError(kind)


class JaxRunner:
    """A gnncore or JraphX model with its jitted step, ready to time."""

    def __init__(self, framework: str, kind: str, g: GraphData, *, seed: int = 0):
        import jax
        import jax.numpy as jnp
        import optax
        from flax import nnx

        if framework == "gnncore":
            from gnncore import Graph, SparseFeatures

            # The idiomatic path: Graph.from_arrays validates, sorts by target and
            # builds graph.adj, the CSR view that sum/mean layers aggregate with.
            graph = Graph.from_arrays(g.edge_index, g.x, y=g.y)
            # Mostly-zero features (Cora: 1.3 %) go in as CSR: the first layer's
            # x @ W then costs the non-zeros only. Dense features stay dense.
            density = float(np.count_nonzero(g.x)) / g.x.size
            x = SparseFeatures.from_dense(g.x) if density < SPARSE_X_MAX_DENSITY else graph.x
            self.args = (x, graph.adj, graph.y)
            model = build_gnncore(kind, g, seed)
        else:
            self.args = (jnp.asarray(g.x), jnp.asarray(g.edge_index), jnp.asarray(g.y))
            model = build_jraphx(kind, g, seed)
        optimizer = nnx.Optimizer(model, optax.adam(LR), wrt=nnx.Param)
        self.graphdef, self.state = nnx.split((model, optimizer))
        jax.block_until_ready((self.args, self.state))
        self.sync = jax.block_until_ready
        self.jitted = _jax_step_factory(self.graphdef)

    def first_call(self) -> tuple[float, float]:
        """Time the first call (trace + compile + one step); returns (s, loss)."""
        t0 = time.perf_counter()
        self.state, loss = self.jitted(self.state, *self.args)
        self.sync((self.state, loss))
        return time.perf_counter() - t0, float(loss)

    def step(self):
        self.state, loss = self.jitted(self.state, *self.args)
        return self.state, loss

    def loss(self) -> float:
        return float(self.step()[1])

    def breakdown(self) -> tuple[float, float]:
        """AOT timings of a fresh jit of the same step: (trace+lower s, XLA compile s)."""
        fresh = _jax_step_factory(self.graphdef)
        t0 = time.perf_counter()
        lowered = fresh.lower(self.state, *self.args)
        t1 = time.perf_counter()
        lowered.compile()
        return t1 - t0, time.perf_counter() - t1


# ---------------------------------------------------------------- PyG side
def build_pyg(kind: str, g: GraphData, seed: int):
    import torch
    from torch_geometric.nn import GATConv, GCNConv, SAGEConv

    torch.manual_seed(seed)
    F, C = g.num_features, g.num_classes

    class TwoLayer(torch.nn.Module):
        def __init__(self, c1, c2, act):
            super().__init__()
            self.c1, self.c2, self.act = c1, c2, act

        def forward(self, x, edge_index):
            return self.c2(self.act(self.c1(x, edge_index)), edge_index)

    if kind == "gcn":
        return TwoLayer(GCNConv(F, HIDDEN), GCNConv(HIDDEN, C), torch.relu)
    if kind == "gat":
        return TwoLayer(GATConv(F, HIDDEN // GAT_HEADS, heads=GAT_HEADS),
                        GATConv(HIDDEN, C, heads=1, concat=False), torch.nn.functional.elu)
    if kind == "sage":
        return TwoLayer(SAGEConv(F, HIDDEN, aggr="mean"), SAGEConv(HIDDEN, C, aggr="mean"),
                        torch.relu)
    raise ValueError(kind)


class PygRunner:
    """A PyG model with torch.optim.Adam, eager."""

    def __init__(self, kind: str, g: GraphData, *, seed: int = 0, threads: int):
        import torch

        self.torch, self.threads = torch, threads
        torch.set_num_threads(threads)
        self.x = torch.from_numpy(g.x)
        self.edge_index = torch.from_numpy(g.edge_index.astype("int64"))
        self.y = torch.from_numpy(g.y.astype("int64"))
        self.model = build_pyg(kind, g, seed)
        self.model.train()  # dropout is 0 everywhere, so train mode does the same work
        self.opt = torch.optim.Adam(self.model.parameters(), lr=LR)
        self.sync = lambda loss: loss.item()

    def step(self):
        import torch.nn.functional as F

        if self.torch.get_num_threads() != self.threads:  # "pyg" and "pyg1" alternate
            self.torch.set_num_threads(self.threads)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(self.x, self.edge_index), self.y)
        loss.backward()
        self.opt.step()
        return loss

    def first_call(self) -> tuple[float, float]:
        t0 = time.perf_counter()
        loss = float(self.step().item())
        return time.perf_counter() - t0, loss

    def loss(self) -> float:
        return float(self.step().item())


def bench_case(kind: str, g: GraphData, frameworks: list[str], *, steps: int, warmup: int,
               rounds: int, breakdown: bool, torch_threads: int) -> list[dict]:
    """Time one (shape, model) for every framework.

    The timed steps are split into ``rounds`` blocks that alternate between the
    frameworks, so that slow drifts in machine load hit all of them alike.
    """
    runners, results = {}, {}
    for fw in frameworks:
        gc.collect()
        time.sleep(0.2)  # let the previous framework's worker threads go idle
        if fw in ("pyg", "pyg1"):
            r = PygRunner(kind, g, threads=torch_threads if fw == "pyg" else 1)
        else:
            r = JaxRunner(fw, kind, g)
        first, loss0 = r.first_call()
        timeit(r.step, r.sync, steps=0, warmup=warmup)
        runners[fw] = r
        results[fw] = {"first_s": first, "loss0": loss0, "times": []}
    per_round = [steps // rounds + (i < steps % rounds) for i in range(rounds)]
    for n in per_round:
        for fw in frameworks:
            r = runners[fw]
            timeit(r.step, r.sync, steps=0, warmup=1)  # re-warm caches after a switch
            results[fw]["times"] += timeit(r.step, r.sync, steps=n, warmup=0)
    out = []
    for fw in frameworks:
        r, res = runners[fw], results[fw]
        res["loss1"] = r.loss()
        res["median_ms"] = median_ms(res["times"])
        res["min_ms"] = 1e3 * min(res["times"])
        jax_fw = fw in ("gnncore", "jraphx")
        res["compile_s"] = res["first_s"] - res["median_ms"] / 1e3 if jax_fw else None
        if breakdown and jax_fw:
            res["lower_s"], res["xla_s"] = r.breakdown()
        res.update(shape=g.name, model=kind, framework=fw)
        out.append(res)
        print(f"  done {g.name:6s} {kind:4s} {fw:7s} median {res['median_ms']:8.2f} ms"
              f"  first call {res['first_s']:.2f} s", flush=True)
    del runners
    return out


# ---------------------------------------------------------------- main
def _load() -> str:
    """1/5/15-minute load average: other processes share this machine."""
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "?"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="few steps, no AOT breakdown (a smoke run)")
    p.add_argument("--steps", type=int, default=None,
                   help="timed steps per row (default 40; 10 with --quick)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps (default 5; 2)")
    p.add_argument("--only", default=",".join(FRAMEWORKS),
                   help="comma list of frameworks: gnncore,jraphx,pyg,pyg1")
    p.add_argument("--models", default=",".join(MODELS), help="comma list: gcn,gat,sage")
    p.add_argument("--shapes", default="random,cora", help="comma list: random,cora")
    p.add_argument("--no-breakdown", action="store_true",
                   help="skip the AOT trace/compile breakdown of the JAX steps")
    p.add_argument("--rounds", type=int, default=None,
                   help="blocks the timed steps are split into, alternating frameworks "
                        "(default 4; 2 with --quick)")
    p.add_argument("--torch-threads", type=int, default=os.cpu_count(),
                   help="torch.set_num_threads for PyG (default: os.cpu_count())")
    p.add_argument("--json", type=Path, default=None, help="also write results here")
    args = p.parse_args(argv)
    steps = args.steps or (10 if args.quick else 40)
    warmup = args.warmup if args.warmup is not None else (2 if args.quick else 5)
    breakdown = not (args.quick or args.no_breakdown)
    rounds = max(1, min(steps, args.rounds or (2 if args.quick else 4)))
    torch_threads = args.torch_threads
    frameworks = [f for f in args.only.split(",") if f]
    models = [m for m in args.models.split(",") if m]
    for f in frameworks:
        if f not in FRAMEWORKS:
            p.error(f"unknown framework {f!r}")
    for m in models:
        if m not in MODELS:
            p.error(f"unknown model {m!r}")

    import importlib.util
    needs = {"jraphx": "jraphx", "pyg": "torch_geometric", "pyg1": "torch_geometric"}
    missing = [f for f in frameworks if f in needs and importlib.util.find_spec(needs[f]) is None]
    if missing:
        print(f"skipping {', '.join(missing)}: not installed "
              "(pip install -r requirements-bench.txt)")
        frameworks = [f for f in frameworks if f not in missing]

    t_start = time.perf_counter()
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory']}; "
          f"python {info['python']}; load average {_load()}")
    vers = versions(["jax", "jaxlib", "flax", "optax", "jraphx", "torch", "torch-geometric",
                     "numpy"])
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()))

    graphs = shapes([s for s in args.shapes.split(",") if s])
    for g in graphs:
        print(f"shape {g.name}: {g.num_nodes} nodes, {g.num_edges} edges, "
              f"{g.num_features} features, {g.num_classes} classes -- {g.source}")
    print(f"steps: {steps} timed (in {rounds} rounds alternating frameworks) after "
          f"{warmup} warm-up; loss over all nodes; dropout 0")

    if any(f in ("gnncore", "jraphx") for f in frameworks):
        import jax
        import jax.numpy as jnp
        jax.block_until_ready(jax.jit(lambda a: a + 1)(jnp.ones(3)))  # start the backend
        print(f"jax backend: {jax.default_backend()}, devices {jax.devices()}")
    if "pyg" in frameworks or "pyg1" in frameworks:
        print(f"torch threads: pyg {torch_threads}, pyg1 1 (os.cpu_count() = {os.cpu_count()})")

    results = []
    for g in graphs:
        for kind in models:
            results += bench_case(kind, g, frameworks, steps=steps, warmup=warmup,
                                  rounds=rounds, breakdown=breakdown,
                                  torch_threads=torch_threads)

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    rows = [[r["shape"], r["model"], r["framework"], fmt(r["first_s"], ".2f"),
             fmt(r["compile_s"], ".2f"), fmt(r.get("lower_s"), ".2f"),
             fmt(r.get("xla_s"), ".2f"), f"{r['median_ms']:.2f}", f"{r['min_ms']:.2f}",
             f"{r['loss0']:.3f} -> {r['loss1']:.3f}"] for r in results]
    print_table(["shape", "model", "framework", "first call s", "compile s",
                 "trace+lower s", "XLA compile s", "median step ms", "min step ms",
                 "loss"], rows, title="Training step (forward + backward + Adam), CPU")

    by = {(r["shape"], r["model"], r["framework"]): r for r in results}
    ratio_rows = []
    for g in graphs:
        for kind in models:
            base = by.get((g.name, kind, "gnncore"))
            if base is None:
                continue
            row = [g.name, kind]
            for other in ("jraphx", "pyg", "pyg1"):
                o = by.get((g.name, kind, other))
                row.append("-" if o is None else f"{base['median_ms'] / o['median_ms']:.2f}")
            o = by.get((g.name, kind, "jraphx"))
            row.append("-" if o is None else
                       f"{base['compile_s']:.2f} / {o['compile_s']:.2f}")
            step_ok = all(c == "-" or float(c) <= 0.5 for c in row[2:4])
            row.append("yes" if step_ok and base["compile_s"] <= 1.0 else "no")
            ratio_rows.append(row)
    if ratio_rows:
        print_table(["shape", "model", "step gnncore/JraphX", "step gnncore/PyG",
                     "step gnncore/PyG 1 thread", "compile s gnncore / JraphX",
                     "target met (<=0.5, <=1 s)"], ratio_rows,
                    title="Ratios (median step time; < 1 means gnncore is faster)")
    print(f"\ntotal wall time {time.perf_counter() - t_start:.0f} s; "
          f"load average now {_load()}")

    if args.json:
        for r in results:
            r["times_ms"] = [1e3 * t for t in r.pop("times")]
        args.json.write_text(json.dumps({"machine": info, "versions": vers,
                                         "steps": steps, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
