"""Breadth benchmark: newer layers and graph classification, gnncore vs JraphX vs PyG (CPU).

Two parts, both timing full training steps (forward + backward + Adam update)
with the method of ``bench_layers.py`` (same graphs, interleaved rounds,
compile reported apart from the step):

1. Node classification, 2-layer models of hidden width 64 on the random
   10k-node / 100k-edge graph and on Cora: GATv2 (4 heads), GIN and
   TransformerConv (4 heads).
2. Graph classification: a stream of distinct batches of 64 small
   molecule-like graphs (15-30 nodes, a random tree plus 1-2 ring closures,
   both edge directions, 16 features), GIN(64) x 3 + sum pool + linear head.
   gnncore uses its padded ``Batch`` (so the whole stream shares one compiled
   step per bucket); JraphX its ``Batch.from_data_list`` (exact sizes, so one
   compile per distinct batch); PyG ``Batch.from_data_list``. The batches are
   built once, before timing; the per-batch collate time is reported apart.

Usage::

    python benchmarks/bench_breadth.py            # full run (~2-6 min on 2 cores)
    python benchmarks/bench_breadth.py --quick    # smoke run
    python benchmarks/bench_breadth.py --parts graph --only gnncore,pyg
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
    sort_by_target,
    timeit,
    versions,
)

FRAMEWORKS = ("gnncore", "jraphx", "pyg", "pyg1")
# "pyg" runs torch with --torch-threads (default os.cpu_count()); "pyg1" with one
# thread (see bench_layers.py: on a loaded machine one thread is often faster).
NODE_MODELS = ("gatv2", "gin", "transformer")
HIDDEN = 64
HEADS = 4
LR = 1e-2
SPARSE_X_MAX_DENSITY = 0.05  # below this, gnncore takes the features as CSR

# graph classification
GRAPHS_PER_BATCH = 64
GRAPH_FEATURES = 16
GRAPH_CLASSES = 2
GIN_LAYERS = 3
MIN_NODES, MAX_NODES = 15, 30


def _load() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "?"


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


# ================================================================ JAX helpers
def _jax_step_factory(graphdef, loss_fn, counter: list | None = None):
    """A fresh jitted training step ``step(state, data) -> (state, loss)``.

    ``loss_fn(model, data)``; ``counter`` (a one-item list) counts traces, i.e.
    compiles, since every trace of a new shape is compiled."""
    import jax
    from flax import nnx

    def step(state, data):
        if counter is not None:
            counter[0] += 1  # Python side effect: runs once per trace
        model, optimizer = nnx.merge(graphdef, state)
        loss, grads = nnx.value_and_grad(lambda m: loss_fn(m, data))(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    return jax.jit(step)


def _node_loss(model, data):
    import optax

    x, edges, y = data
    return optax.softmax_cross_entropy_with_integer_labels(model(x, edges), y).mean()


class _MLP2:
    """Factory namespace for the GIN network ``Linear -> ReLU -> Linear``
    (gnncore's default GIN ``MLP``) in JraphX and PyG."""

    @staticmethod
    def jraphx(a: int, b: int, c: int, rngs):
        from flax import nnx

        return nnx.Sequential(nnx.Linear(a, b, rngs=rngs), nnx.relu,
                              nnx.Linear(b, c, rngs=rngs))

    @staticmethod
    def pyg(a: int, b: int, c: int):
        import torch

        return torch.nn.Sequential(torch.nn.Linear(a, b), torch.nn.ReLU(),
                                   torch.nn.Linear(b, c))


# ============================================================ node-level part
def build_gnncore_node(kind: str, g: GraphData, seed: int):
    from flax import nnx

    from gnncore import GNN, ConvSpec

    rngs = nnx.Rngs(seed)
    F, C = g.num_features, g.num_classes
    if kind == "gatv2":
        # 4 heads x 16 concatenated, ELU; output layer 1 head, averaged.
        return GNN(F, [ConvSpec("gatv2", HIDDEN, {"heads": HEADS}),
                       ConvSpec("gatv2", C, {"heads": 1, "concat": False})],
                   activation="elu", rngs=rngs)
    if kind == "gin":
        # default MLPs [F, 64, 64] and [64, C, C]
        return GNN(F, [ConvSpec("gin", HIDDEN), ConvSpec("gin", C)], activation="relu",
                   rngs=rngs)
    if kind == "transformer":
        return GNN(F, [ConvSpec("transformer", HIDDEN, {"heads": HEADS}),
                       ConvSpec("transformer", C, {"heads": 1})],
                   activation="relu", rngs=rngs)
    raise ValueError(kind)


def build_jraphx_node(kind: str, g: GraphData, seed: int):
    import jax
    from flax import nnx
    from jraphx.nn.conv import GATv2Conv, GINConv, TransformerConv

    rngs = nnx.Rngs(seed)
    F, C = g.num_features, g.num_classes

    class TwoLayer(nnx.Module):
        def __init__(self, c1, c2, act):
            self.c1, self.c2, self.act = c1, c2, act

        def __call__(self, x, edge_index):
            return self.c2(self.act(self.c1(x, edge_index)), edge_index)

    if kind == "gatv2":
        return TwoLayer(GATv2Conv(F, HIDDEN // HEADS, heads=HEADS, rngs=rngs),
                        GATv2Conv(HIDDEN, C, heads=1, concat=False, rngs=rngs), jax.nn.elu)
    if kind == "gin":
        return TwoLayer(GINConv(_MLP2.jraphx(F, HIDDEN, HIDDEN, rngs), rngs=rngs),
                        GINConv(_MLP2.jraphx(HIDDEN, C, C, rngs), rngs=rngs), jax.nn.relu)
    if kind == "transformer":
        return TwoLayer(TransformerConv(F, HIDDEN // HEADS, heads=HEADS, rngs=rngs),
                        TransformerConv(HIDDEN, C, heads=1, rngs=rngs), jax.nn.relu)
    raise ValueError(kind)


def build_pyg_node(kind: str, g: GraphData, seed: int):
    import torch
    from torch_geometric.nn import GATv2Conv, GINConv, TransformerConv

    torch.manual_seed(seed)
    F, C = g.num_features, g.num_classes

    class TwoLayer(torch.nn.Module):
        def __init__(self, c1, c2, act):
            super().__init__()
            self.c1, self.c2, self.act = c1, c2, act

        def forward(self, x, edge_index):
            return self.c2(self.act(self.c1(x, edge_index)), edge_index)

    if kind == "gatv2":
        return TwoLayer(GATv2Conv(F, HIDDEN // HEADS, heads=HEADS),
                        GATv2Conv(HIDDEN, C, heads=1, concat=False), torch.nn.functional.elu)
    if kind == "gin":
        return TwoLayer(GINConv(_MLP2.pyg(F, HIDDEN, HIDDEN)), GINConv(_MLP2.pyg(HIDDEN, C, C)),
                        torch.relu)
    if kind == "transformer":
        return TwoLayer(TransformerConv(F, HIDDEN // HEADS, heads=HEADS),
                        TransformerConv(HIDDEN, C, heads=1), torch.relu)
    raise ValueError(kind)


class JaxRunner:
    """A gnncore or JraphX model with its jitted step over a list of inputs
    (one graph for node classification, a stream of batches for graphs)."""

    def __init__(self, model, inputs: list, loss_fn):
        import jax
        import optax
        from flax import nnx

        self.inputs, self.i, self.loss_fn = inputs, 0, loss_fn
        optimizer = nnx.Optimizer(model, optax.adam(LR), wrt=nnx.Param)
        self.graphdef, self.state = nnx.split((model, optimizer))
        jax.block_until_ready((self.inputs, self.state))
        self.sync = jax.block_until_ready
        self.traces = [0]
        self.jitted = _jax_step_factory(self.graphdef, loss_fn, self.traces)

    def _next(self):
        data = self.inputs[self.i]
        self.i = (self.i + 1) % len(self.inputs)
        return data

    def step(self):
        self.state, loss = self.jitted(self.state, self._next())
        return self.state, loss

    def timed_step(self) -> tuple[float, float, bool]:
        """One synced step: (seconds, loss, whether it traced and compiled)."""
        before = self.traces[0]
        t0 = time.perf_counter()
        state, loss = self.step()
        self.sync((state, loss))
        return time.perf_counter() - t0, float(loss), self.traces[0] > before

    def loss_on(self, k: int) -> float:
        """The loss of a step on input ``k`` (the step is applied)."""
        self.state, loss = self.jitted(self.state, self.inputs[k])
        return float(loss)

    def breakdown(self) -> tuple[float, float]:
        """AOT timings of a fresh jit of the step: (trace+lower s, XLA compile s)."""
        fresh = _jax_step_factory(self.graphdef, self.loss_fn)
        t0 = time.perf_counter()
        lowered = fresh.lower(self.state, self.inputs[0])
        t1 = time.perf_counter()
        lowered.compile()
        return t1 - t0, time.perf_counter() - t1


class PygRunner:
    """A PyG model with torch.optim.Adam, eager, over a list of inputs
    ``(x, edge_index, batch_or_None, y)``."""

    def __init__(self, model, inputs: list, *, threads: int):
        import torch

        self.torch, self.threads = torch, threads
        torch.set_num_threads(threads)
        self.model, self.inputs, self.i = model, inputs, 0
        self.model.train()  # no dropout anywhere: train mode does the same work
        self.opt = torch.optim.Adam(self.model.parameters(), lr=LR)
        self.sync = lambda loss: loss.item()

    def _run(self, data):
        import torch.nn.functional as F

        if self.torch.get_num_threads() != self.threads:  # "pyg" and "pyg1" alternate
            self.torch.set_num_threads(self.threads)
        x, edge_index, batch, y = data
        self.opt.zero_grad(set_to_none=True)
        out = self.model(x, edge_index) if batch is None else self.model(x, edge_index, batch)
        loss = F.cross_entropy(out, y)
        loss.backward()
        self.opt.step()
        return loss

    def step(self):
        data = self.inputs[self.i]
        self.i = (self.i + 1) % len(self.inputs)
        return self._run(data)

    def timed_step(self) -> tuple[float, float, bool]:
        t0 = time.perf_counter()
        loss = float(self.step().item())
        return time.perf_counter() - t0, loss, False

    def loss_on(self, k: int) -> float:
        return float(self._run(self.inputs[k]).item())


def node_runner(fw: str, kind: str, g: GraphData, *, torch_threads: int, seed: int = 0):
    if fw in ("pyg", "pyg1"):
        import torch

        data = (torch.from_numpy(g.x), torch.from_numpy(g.edge_index.astype("int64")), None,
                torch.from_numpy(g.y.astype("int64")))
        return PygRunner(build_pyg_node(kind, g, seed), [data],
                         threads=torch_threads if fw == "pyg" else 1)
    import jax.numpy as jnp

    if fw == "gnncore":
        from gnncore import Graph, SparseFeatures

        # The documented fast path: graph.adj (CSR both ways) instead of edge_index,
        # mostly-zero features (Cora: 1.3 %) as CSR; dense features stay dense.
        graph = Graph.from_arrays(g.edge_index, g.x, y=g.y)
        density = float(np.count_nonzero(g.x)) / g.x.size
        x = SparseFeatures.from_dense(g.x) if density < SPARSE_X_MAX_DENSITY else graph.x
        return JaxRunner(build_gnncore_node(kind, g, seed), [(x, graph.adj, graph.y)],
                         _node_loss)
    data = (jnp.asarray(g.x), jnp.asarray(g.edge_index), jnp.asarray(g.y))
    return JaxRunner(build_jraphx_node(kind, g, seed), [data], _node_loss)


# =========================================================== graph-level part
def molecule_graphs(count: int, *, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """``count`` molecule-sized graphs ``(x [n, 16], edge_index [2, E], label)``.

    n uniform in [15, 30]; a random tree (node i joins a random earlier node)
    plus 1-2 ring-closing edges, both directions, so ~2.1 directed edges per
    node; standard-normal features; label 1 when n > 22 (learnable by a sum
    readout). Edges sorted by target, then source. Seeded numpy."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(MIN_NODES, MAX_NODES + 1))
        pairs = {(int(rng.integers(0, i)), i) for i in range(1, n)}
        for _ in range(int(rng.integers(1, 3))):
            while True:
                a, b = sorted(int(v) for v in rng.choice(n, 2, replace=False))
                if (a, b) not in pairs:
                    pairs.add((a, b))
                    break
        und = np.array(sorted(pairs), dtype=np.int64).T
        ei = sort_by_target(np.concatenate([und, und[::-1]], axis=1))
        x = rng.standard_normal((n, GRAPH_FEATURES), dtype=np.float32)
        out.append((x, ei, int(n > 22)))
    return out


def _graph_loss_gnncore(model, b):
    import jax.numpy as jnp
    import optax

    logits = model(b.x, b.adj, batch=b.batch, num_graphs=b.num_graphs, node_mask=b.node_mask)
    mask = b.graph_mask.astype(logits.dtype)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.where(b.graph_mask, b.y, 0))
    return jnp.sum(ce * mask) / jnp.sum(mask)


def _graph_loss_jraphx(model, data):
    import optax

    x, edge_index, batch, y = data
    return optax.softmax_cross_entropy_with_integer_labels(model(x, edge_index, batch), y).mean()


def build_gnncore_graph(seed: int):
    from flax import nnx

    from gnncore import GNN, ConvSpec

    return GNN(GRAPH_FEATURES, [ConvSpec("gin", HIDDEN)] * GIN_LAYERS,
               out_features=GRAPH_CLASSES, head=True, pool="sum", activation="relu",
               rngs=nnx.Rngs(seed))


def build_jraphx_graph(seed: int):
    import jax
    from flax import nnx
    from jraphx.nn.conv import GINConv
    from jraphx.nn.pool import global_add_pool

    rngs = nnx.Rngs(seed)

    class GraphGIN(nnx.Module):
        def __init__(self):
            widths = [GRAPH_FEATURES] + [HIDDEN] * GIN_LAYERS
            self.convs = nnx.List([GINConv(_MLP2.jraphx(a, b, b, rngs), rngs=rngs)
                                   for a, b in zip(widths[:-1], widths[1:], strict=True)])
            self.head = nnx.Linear(HIDDEN, GRAPH_CLASSES, rngs=rngs)

        def __call__(self, x, edge_index, batch):
            for conv in self.convs:
                x = jax.nn.relu(conv(x, edge_index))
            return self.head(global_add_pool(x, batch, size=GRAPHS_PER_BATCH))

    return GraphGIN()


def build_pyg_graph(seed: int):
    import torch
    from torch_geometric.nn import GINConv, global_add_pool

    torch.manual_seed(seed)

    class GraphGIN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            widths = [GRAPH_FEATURES] + [HIDDEN] * GIN_LAYERS
            pairs = zip(widths[:-1], widths[1:], strict=True)
            self.convs = torch.nn.ModuleList([GINConv(_MLP2.pyg(a, b, b)) for a, b in pairs])
            self.head = torch.nn.Linear(HIDDEN, GRAPH_CLASSES)

        def forward(self, x, edge_index, batch):
            for conv in self.convs:
                x = torch.relu(conv(x, edge_index))
            return self.head(global_add_pool(x, batch, size=GRAPHS_PER_BATCH))

    return GraphGIN()


def collate(fw: str, groups: list[list], *, fixed: tuple[int, int, int] | None = None):
    """Build every batch of the stream the framework's own way; returns
    (batches, median collate seconds per batch). Per-graph objects are made
    first (dataset preprocessing, not timed)."""
    import jax

    if fw.startswith("gnncore"):
        from gnncore import Batch, Graph

        per = [[Graph.from_arrays(ei, x) for x, ei, _ in grp] for grp in groups]
        labels = [[lab for _, _, lab in grp] for grp in groups]

        def make(k):
            if fixed is None:
                return Batch.from_graphs(per[k], labels[k])
            n, e, gcount = fixed
            return Batch.from_graphs(per[k], labels[k], num_nodes=n, num_edges=e,
                                     num_graphs=gcount)
    elif fw == "jraphx":
        import jax.numpy as jnp
        from jraphx.data import Batch, Data

        per = [[Data(x=jnp.asarray(x), edge_index=jnp.asarray(ei.astype(np.int32)),
                     y=jnp.asarray(lab, jnp.int32)) for x, ei, lab in grp] for grp in groups]

        def make(k):
            b = Batch.from_data_list(per[k])
            return (b.x, b.edge_index, b.batch, b.y)
    else:
        import torch
        from torch_geometric.data import Batch, Data

        per = [[Data(x=torch.from_numpy(x), edge_index=torch.from_numpy(ei.astype(np.int64)),
                     y=torch.tensor([lab])) for x, ei, lab in grp] for grp in groups]

        def make(k):
            b = Batch.from_data_list(per[k])
            return (b.x, b.edge_index, b.batch, b.y)

    out, times = [], []
    for k in range(len(groups)):
        t0 = time.perf_counter()
        b = make(k)
        if not fw.startswith("pyg"):
            jax.block_until_ready(b)
        times.append(time.perf_counter() - t0)
        out.append(b)
    return out, float(np.median(times))


def graph_runner(fw: str, batches: list, *, torch_threads: int, seed: int = 0):
    if fw in ("pyg", "pyg1"):
        return PygRunner(build_pyg_graph(seed), batches,
                         threads=torch_threads if fw == "pyg" else 1)
    if fw.startswith("gnncore"):
        return JaxRunner(build_gnncore_graph(seed), batches, _graph_loss_gnncore)
    return JaxRunner(build_jraphx_graph(seed), batches, _graph_loss_jraphx)


# ================================================================== timing
def interleave(runners: dict, results: dict, *, steps: int, rounds: int,
               max_row_s: float) -> None:
    """The timed steps in ``rounds`` blocks alternating between the frameworks
    (one untimed step after each switch), so slow drifts in load hit all alike.

    A row stops a round early once it has spent ``max_row_s / rounds`` seconds
    in it (at least 2 steps per round): under load, torch with 2 threads can
    take over a second per step, and the run must still end in minutes."""
    per_round = [steps // rounds + (i < steps % rounds) for i in range(rounds)]
    budget = max_row_s / rounds
    for n in per_round:
        for fw, r in runners.items():
            timeit(r.step, r.sync, steps=0, warmup=1)
            spent, times = 0.0, results[fw]["times"]
            for k in range(n):
                if k >= 2 and spent > budget:
                    break
                t = timeit(r.step, r.sync, steps=1, warmup=0)[0]
                times.append(t)
                spent += t


def bench_node(kind: str, g: GraphData, frameworks: list[str], *, steps: int, warmup: int,
               rounds: int, breakdown: bool, torch_threads: int,
               max_row_s: float) -> list[dict]:
    runners, results = {}, {}
    for fw in frameworks:
        gc.collect()
        time.sleep(0.2)  # let the previous framework's worker threads go idle
        r = node_runner(fw, kind, g, torch_threads=torch_threads)
        first, loss0, _ = r.timed_step()
        t0 = time.perf_counter()
        for _ in range(warmup):  # at most ~3 s of warm-up (torch under load)
            r.sync(r.step())
            if time.perf_counter() - t0 > 3.0:
                break
        runners[fw], results[fw] = r, {"first_s": first, "loss0": loss0, "times": []}
    interleave(runners, results, steps=steps, rounds=rounds, max_row_s=max_row_s)
    out = []
    for fw, r in runners.items():
        res = results[fw]
        res["loss1"] = r.loss_on(0)
        res["median_ms"], res["min_ms"] = median_ms(res["times"]), 1e3 * min(res["times"])
        jax_fw = fw in ("gnncore", "jraphx")
        res["compile_s"] = res["first_s"] - res["median_ms"] / 1e3 if jax_fw else None
        if breakdown and jax_fw:
            res["lower_s"], res["xla_s"] = r.breakdown()
        res.update(shape=g.name, model=kind, framework=fw)
        out.append(res)
        print(f"  done {g.name:6s} {kind:11s} {fw:7s} median {res['median_ms']:8.2f} ms"
              f"  first call {res['first_s']:.2f} s", flush=True)
    return out


def bench_graph(frameworks: list[str], *, num_batches: int, steps: int, rounds: int,
                torch_threads: int, max_row_s: float,
                seed: int = 0) -> tuple[list[dict], dict]:
    graphs = molecule_graphs(num_batches * GRAPHS_PER_BATCH, seed=seed)
    groups = [graphs[k * GRAPHS_PER_BATCH:(k + 1) * GRAPHS_PER_BATCH]
              for k in range(num_batches)]
    nodes = [sum(x.shape[0] for x, _, _ in grp) for grp in groups]
    edges = [sum(ei.shape[1] for _, ei, _ in grp) for grp in groups]
    # gnncore:max pads every batch to the stream's largest sizes (+1 padding
    # node and graph), instead of power-of-two buckets.
    fixed = (max(nodes) + 1, max(edges), GRAPHS_PER_BATCH + 1)
    stream = {"batches": num_batches, "graphs_per_batch": GRAPHS_PER_BATCH,
              "nodes": (min(nodes), max(nodes)), "edges": (min(edges), max(edges)),
              "fixed": fixed}

    import jax

    collated = {}
    for fw in frameworks:
        # Each framework collates with cold JAX caches: eager jnp ops compile per
        # new shape, and the two gnncore variants collate the same graphs.
        jax.clear_caches()
        collated[fw] = collate(fw, groups, fixed=fixed if fw == "gnncore:max" else None)
    runners, results = {}, {}
    for fw in frameworks:
        gc.collect()
        time.sleep(0.2)
        batches, collate_s = collated.pop(fw)
        r = graph_runner(fw, batches, torch_threads=torch_threads, seed=seed)
        # One pass over the stream: every new shape traces and compiles here.
        first = [r.timed_step() for _ in batches]
        compiled = [t for t, _, new in first if new]
        runners[fw] = r
        res = {"first_s": first[0][0], "loss0": first[0][1], "times": [],
               "collate_ms": 1e3 * collate_s, "first_pass": [t for t, _, _ in first],
               "compiles": len(compiled) if fw in ("gnncore", "gnncore:max", "jraphx")
               else None}
        if fw.startswith("gnncore"):
            res["pad"] = tuple(int(v) for v in batches[0].shape_key())
            res["shape_keys"] = len({b.shape_key() for b in batches})
        results[fw] = res
    interleave(runners, results, steps=steps, rounds=rounds, max_row_s=max_row_s)
    out = []
    for fw, r in runners.items():
        res = results[fw]
        r.i = 0
        res["loss1"] = r.loss_on(0)
        res["median_ms"], res["min_ms"] = median_ms(res["times"]), 1e3 * min(res["times"])
        if res["compiles"] is not None:
            # every compiling call of the first pass, less one ordinary step each
            passes = res.pop("first_pass")
            firsts = sorted(passes, reverse=True)[:res["compiles"]]
            res["compile_s"] = sum(firsts) - res["compiles"] * res["median_ms"] / 1e3
        else:
            res.pop("first_pass")
            res["compile_s"] = None
        res["framework"] = fw
        out.append(res)
        print(f"  done graphs {fw:11s} median {res['median_ms']:8.2f} ms"
              f"  compiles {res['compiles']}", flush=True)
    return out, stream


# ==================================================================== main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="few steps, fewer batches, no AOT breakdown (a smoke run)")
    p.add_argument("--steps", type=int, default=None,
                   help="timed steps per row (default 40; 10 with --quick)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed steps, node part (default 5; 2)")
    p.add_argument("--rounds", type=int, default=None,
                   help="blocks alternating frameworks (default 4; 2 with --quick)")
    p.add_argument("--only", default=",".join(FRAMEWORKS),
                   help="comma list of frameworks: gnncore,jraphx,pyg,pyg1")
    p.add_argument("--parts", default="node,graph", help="comma list: node,graph")
    p.add_argument("--models", default=",".join(NODE_MODELS),
                   help="node part, comma list: gatv2,gin,transformer")
    p.add_argument("--shapes", default="random,cora", help="node part: random,cora")
    p.add_argument("--batches", type=int, default=None,
                   help="distinct batches in the graph stream (default 20; 8 with --quick)")
    p.add_argument("--no-breakdown", action="store_true",
                   help="skip the AOT trace/compile breakdown of the JAX steps")
    p.add_argument("--torch-threads", type=int, default=os.cpu_count(),
                   help="torch.set_num_threads for the pyg rows (default: os.cpu_count())")
    p.add_argument("--max-row-s", type=float, default=8.0,
                   help="timed seconds per row before it stops early (default 8)")
    p.add_argument("--json", type=Path, default=None, help="also write results here")
    args = p.parse_args(argv)
    steps = args.steps or (10 if args.quick else 40)
    warmup = args.warmup if args.warmup is not None else (2 if args.quick else 5)
    rounds = max(1, min(steps, args.rounds or (2 if args.quick else 4)))
    num_batches = args.batches or (8 if args.quick else 20)
    breakdown = not (args.quick or args.no_breakdown)
    frameworks = [f for f in args.only.split(",") if f]
    parts = [s for s in args.parts.split(",") if s]
    models = [m for m in args.models.split(",") if m]
    for f in frameworks:
        if f not in FRAMEWORKS:
            p.error(f"unknown framework {f!r}")
    for m in models:
        if m not in NODE_MODELS:
            p.error(f"unknown model {m!r}")
    for s in parts:
        if s not in ("node", "graph"):
            p.error(f"unknown part {s!r}")

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
    if any(f in ("gnncore", "jraphx") for f in frameworks):
        import jax
        import jax.numpy as jnp
        jax.block_until_ready(jax.jit(lambda a: a + 1)(jnp.ones(3)))  # start the backend
        print(f"jax backend: {jax.default_backend()}, devices {jax.devices()}")
    if "pyg" in frameworks or "pyg1" in frameworks:
        print(f"torch threads: pyg {args.torch_threads}, pyg1 1 "
              f"(os.cpu_count() = {os.cpu_count()})")
    print(f"steps: {steps} timed per row (in {rounds} rounds alternating frameworks); "
          "dropout 0; Adam lr 0.01")

    report: dict = {"machine": info, "versions": vers, "steps": steps}
    if "node" in parts:
        graphs = shapes([s for s in args.shapes.split(",") if s])
        print("\n== node classification (2 layers, hidden 64; GATv2/Transformer 4 heads)")
        for g in graphs:
            print(f"shape {g.name}: {g.num_nodes} nodes, {g.num_edges} edges, "
                  f"{g.num_features} features, {g.num_classes} classes -- {g.source}")
        node_results = []
        for g in graphs:
            for kind in models:
                node_results += bench_node(kind, g, frameworks, steps=steps, warmup=warmup,
                                           rounds=rounds, breakdown=breakdown,
                                           torch_threads=args.torch_threads,
                                           max_row_s=args.max_row_s)
        print_node_tables(node_results, graphs, models)
        report["node"] = node_results

    if "graph" in parts:
        gfws = [f for f in frameworks if f != "gnncore"]
        if "gnncore" in frameworks:
            gfws = ["gnncore", "gnncore:max"] + gfws
        print(f"\n== graph classification: {num_batches} distinct batches of "
              f"{GRAPHS_PER_BATCH} graphs ({MIN_NODES}-{MAX_NODES} nodes), "
              f"GIN({HIDDEN}) x {GIN_LAYERS} + sum pool + linear, {GRAPH_CLASSES} classes")
        graph_results, stream = bench_graph(gfws, num_batches=num_batches, steps=steps,
                                            rounds=rounds, torch_threads=args.torch_threads,
                                            max_row_s=args.max_row_s)
        print_graph_tables(graph_results, stream)
        report["graph"], report["stream"] = graph_results, stream

    print(f"\ntotal wall time {time.perf_counter() - t_start:.0f} s; "
          f"load average now {_load()}")
    if args.json:
        for part in ("node", "graph"):
            for r in report.get(part, []):
                r["times_ms"] = [1e3 * t for t in r.pop("times")]
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


def _ratio(base, other):
    return "-" if base is None or other is None else f"{base / other:.2f}"


def _target(base: float, jraphx: float | None, pyg: float | None, pyg1: float | None) -> str:
    """'yes' when gnncore's step is <= 0.5 of JraphX's and of PyG's faster thread
    setting (under load, torch with 2 threads can be 10-50x slower than with 1,
    and a ratio against that would say nothing)."""
    peers = [jraphx, min((v for v in (pyg, pyg1) if v is not None), default=None)]
    return "yes" if all(p is None or base / p <= 0.5 for p in peers) else "no"


def print_node_tables(results: list[dict], graphs: list[GraphData], models: list[str]) -> None:
    rows = [[r["shape"], r["model"], r["framework"], _fmt(r["first_s"], ".2f"),
             _fmt(r["compile_s"], ".2f"), _fmt(r.get("lower_s"), ".2f"),
             _fmt(r.get("xla_s"), ".2f"), f"{r['median_ms']:.2f}", f"{r['min_ms']:.2f}",
             len(r["times"]), f"{r['loss0']:.3f} -> {r['loss1']:.3f}"] for r in results]
    print_table(["shape", "model", "framework", "first call s", "compile s", "trace+lower s",
                 "XLA compile s", "median step ms", "min step ms", "n", "loss"], rows,
                title="Node classification: training step (forward + backward + Adam), CPU")
    by = {(r["shape"], r["model"], r["framework"]): r for r in results}
    ratio_rows = []
    for g in graphs:
        for kind in models:
            base = by.get((g.name, kind, "gnncore"))
            if base is None:
                continue
            ms = {fw: (by[(g.name, kind, fw)]["median_ms"] if (g.name, kind, fw) in by
                       else None) for fw in ("jraphx", "pyg", "pyg1")}
            row = [g.name, kind] + [_ratio(base["median_ms"], ms[fw])
                                    for fw in ("jraphx", "pyg", "pyg1")]
            jx = by.get((g.name, kind, "jraphx"))
            row.append(f"{base['compile_s']:.2f}" + ("" if jx is None
                                                      else f" / {jx['compile_s']:.2f}"))
            row.append(_target(base["median_ms"], ms["jraphx"], ms["pyg"], ms["pyg1"]))
            ratio_rows.append(row)
    if ratio_rows:
        print_table(["shape", "model", "step gnncore/JraphX", "step gnncore/PyG",
                     "step gnncore/PyG 1 thread", "compile s gnncore / JraphX",
                     "target met (<=0.5 vs JraphX and best PyG)"], ratio_rows,
                    title="Node classification ratios (median step; < 1: gnncore faster)")


def print_graph_tables(results: list[dict], stream: dict) -> None:
    print(f"stream: {stream['batches']} batches x {stream['graphs_per_batch']} graphs, "
          f"{stream['nodes'][0]}-{stream['nodes'][1]} nodes and {stream['edges'][0]}-"
          f"{stream['edges'][1]} directed edges per batch")
    for r in results:
        if "pad" in r:
            n, e, gcount = r["pad"]
            print(f"{r['framework']}: padded to {n} nodes, {e} edges, {gcount} graph slots; "
                  f"{r['shape_keys']} distinct shape(s) over the stream")
    rows = [[r["framework"], f"{r['collate_ms']:.2f}", _fmt(r["compiles"], "d"),
             _fmt(r["compile_s"], ".2f"), f"{r['first_s']:.2f}", f"{r['median_ms']:.2f}",
             f"{r['min_ms']:.2f}", len(r["times"]), f"{r['loss0']:.3f} -> {r['loss1']:.3f}"]
            for r in results]
    print_table(["framework", "collate ms/batch", "compiles over stream",
                 "compile s (all)", "first call s", "median step ms", "min step ms", "n",
                 "loss on batch 0"], rows,
                title="Graph classification: training step over a cycled stream of batches")
    by = {r["framework"]: r for r in results}
    ratio_rows = []
    for name in ("gnncore", "gnncore:max"):
        base = by.get(name)
        if base is None:
            continue
        row = [name] + [_ratio(base["median_ms"], by[o]["median_ms"] if o in by else None)
                        for o in ("jraphx", "pyg", "pyg1")]
        jx = by.get("jraphx")
        row.append(f"{base['compile_s']:.2f}" + ("" if jx is None
                                                  else f" / {jx['compile_s']:.2f}"))
        ms = {o: by[o]["median_ms"] if o in by else None for o in ("jraphx", "pyg", "pyg1")}
        row.append(_target(base["median_ms"], ms["jraphx"], ms["pyg"], ms["pyg1"]))
        ratio_rows.append(row)
    if ratio_rows:
        print_table(["gnncore variant", "step gnncore/JraphX", "step gnncore/PyG",
                     "step gnncore/PyG 1 thread", "compile s (all) gnncore / JraphX",
                     "target met (<=0.5 vs JraphX and best PyG)"], ratio_rows,
                    title="Graph classification ratios (median step; < 1: gnncore faster)")


if __name__ == "__main__":
    sys.exit(main())
