"""Breadth benchmark: newer layers and graph classification, gnncore vs JraphX vs PyG (CPU).

Two parts, both timing full training steps (forward + backward + Adam update)
with the runners of ``benchmarks/runners.py``, as ``bench_layers`` (same graphs,
interleaved rounds, compile reported apart from the step):

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

Usage (from the repository root)::

    python -m benchmarks.bench_breadth            # full run (~2-6 min on 2 cores)
    python -m benchmarks.bench_breadth --quick    # smoke run
    python -m benchmarks.bench_breadth --parts graph --only gnncore,pyg
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from functools import partial

import numpy as np

from benchmarks.common import (
    GraphData,
    fmt,
    load_average,
    median_ms,
    print_table,
    shapes,
    sort_by_target,
)
from benchmarks.runners import (
    JaxRunner,
    PygRunner,
    add_step_options,
    interleave,
    node_runner,
    print_machine,
    print_ratio_table,
    print_step_table,
    ratio,
    start_backends,
    step_settings,
    summarise,
    time_rows,
    two_layer_nnx,
    two_layer_torch,
    write_json,
)

NODE_MODELS = ("gatv2", "gin", "transformer")
HIDDEN = 64
HEADS = 4
# gnncore and "gnncore:max" (padded to the stream's largest batch) in the graph part
JAX_GRAPH = ("gnncore", "gnncore:max", "jraphx")

# graph classification
GRAPHS_PER_BATCH = 64
GRAPH_FEATURES = 16
GRAPH_CLASSES = 2
GIN_LAYERS = 3
MIN_NODES, MAX_NODES = 15, 30


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
    if kind == "gatv2":
        return two_layer_nnx(GATv2Conv(F, HIDDEN // HEADS, heads=HEADS, rngs=rngs),
                             GATv2Conv(HIDDEN, C, heads=1, concat=False, rngs=rngs),
                             jax.nn.elu)
    if kind == "gin":
        return two_layer_nnx(GINConv(_MLP2.jraphx(F, HIDDEN, HIDDEN, rngs), rngs=rngs),
                             GINConv(_MLP2.jraphx(HIDDEN, C, C, rngs), rngs=rngs), jax.nn.relu)
    if kind == "transformer":
        return two_layer_nnx(TransformerConv(F, HIDDEN // HEADS, heads=HEADS, rngs=rngs),
                             TransformerConv(HIDDEN, C, heads=1, rngs=rngs), jax.nn.relu)
    raise ValueError(kind)


def build_pyg_node(kind: str, g: GraphData, seed: int):
    import torch
    from torch_geometric.nn import GATv2Conv, GINConv, TransformerConv

    torch.manual_seed(seed)
    F, C = g.num_features, g.num_classes
    if kind == "gatv2":
        return two_layer_torch(GATv2Conv(F, HIDDEN // HEADS, heads=HEADS),
                               GATv2Conv(HIDDEN, C, heads=1, concat=False),
                               torch.nn.functional.elu)
    if kind == "gin":
        return two_layer_torch(GINConv(_MLP2.pyg(F, HIDDEN, HIDDEN)),
                               GINConv(_MLP2.pyg(HIDDEN, C, C)), torch.relu)
    if kind == "transformer":
        return two_layer_torch(TransformerConv(F, HIDDEN // HEADS, heads=HEADS),
                               TransformerConv(HIDDEN, C, heads=1), torch.relu)
    raise ValueError(kind)


NODE_BUILDERS = {"gnncore": build_gnncore_node, "jraphx": build_jraphx_node,
                 "pyg": build_pyg_node}


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


def bench_node(kind: str, g: GraphData, frameworks: list[str], *, steps: int, warmup: int,
               rounds: int, breakdown: bool, torch_threads: int,
               max_row_s: float) -> list[dict]:
    """Time one (shape, model) for every framework; at most ~3 s of warm-up
    (torch under load) and ``max_row_s`` timed seconds per row."""
    makers = {fw: partial(node_runner, fw, kind, g, NODE_BUILDERS, torch_threads=torch_threads)
              for fw in frameworks}
    runners, results = time_rows(makers, steps=steps, warmup=warmup, rounds=rounds,
                                 max_row_s=max_row_s, warmup_cap_s=3.0)
    return summarise(runners, results, breakdown=breakdown, label=f"{g.name:6s} {kind:11s}",
                     shape=g.name, model=kind)


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
               "compiles": len(compiled) if fw in JAX_GRAPH else None}
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
    add_step_options(p, quick_help="few steps, fewer batches, no AOT breakdown (a smoke run)")
    p.add_argument("--parts", default="node,graph", help="comma list: node,graph")
    p.add_argument("--models", default=",".join(NODE_MODELS),
                   help="node part, comma list: gatv2,gin,transformer")
    p.add_argument("--shapes", default="random,cora", help="node part: random,cora")
    p.add_argument("--batches", type=int, default=None,
                   help="distinct batches in the graph stream (default 20; 8 with --quick)")
    p.add_argument("--max-row-s", type=float, default=8.0,
                   help="timed seconds per row before it stops early (default 8)")
    args = p.parse_args(argv)
    num_batches = args.batches or (8 if args.quick else 20)
    parts = [s for s in args.parts.split(",") if s]
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in NODE_MODELS:
            p.error(f"unknown model {m!r}")
    for s in parts:
        if s not in ("node", "graph"):
            p.error(f"unknown part {s!r}")
    cfg = step_settings(p, args)
    frameworks, steps, rounds = cfg.frameworks, cfg.steps, cfg.rounds

    t_start = time.perf_counter()
    info, vers = print_machine()
    start_backends(frameworks, cfg.torch_threads)
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
                node_results += bench_node(kind, g, frameworks, steps=steps, warmup=cfg.warmup,
                                           rounds=rounds, breakdown=cfg.breakdown,
                                           torch_threads=cfg.torch_threads,
                                           max_row_s=args.max_row_s)
        print_step_table(node_results, n_column=True, title="Node classification: training "
                         "step (forward + backward + Adam), CPU")
        print_ratio_table(node_results, graphs, models, target=_target,
                          target_header="target met (<=0.5 vs JraphX and best PyG)",
                          title="Node classification ratios (median step; < 1: gnncore faster)")
        report["node"] = node_results

    if "graph" in parts:
        gfws = [f for f in frameworks if f != "gnncore"]
        if "gnncore" in frameworks:
            gfws = ["gnncore", "gnncore:max"] + gfws
        print(f"\n== graph classification: {num_batches} distinct batches of "
              f"{GRAPHS_PER_BATCH} graphs ({MIN_NODES}-{MAX_NODES} nodes), "
              f"GIN({HIDDEN}) x {GIN_LAYERS} + sum pool + linear, {GRAPH_CLASSES} classes")
        graph_results, stream = bench_graph(gfws, num_batches=num_batches, steps=steps,
                                            rounds=rounds, torch_threads=cfg.torch_threads,
                                            max_row_s=args.max_row_s)
        print_graph_tables(graph_results, stream)
        report["graph"], report["stream"] = graph_results, stream

    print(f"\ntotal wall time {time.perf_counter() - t_start:.0f} s; "
          f"load average now {load_average()}")
    if args.json:
        write_json(args.json, report, ("node", "graph"))
    return 0


def _target(base: dict, ms: dict) -> str:
    """'yes' when gnncore's step is <= 0.5 of JraphX's and of PyG's faster thread
    setting (under load, torch with 2 threads can be 10-50x slower than with 1,
    and a ratio against that would say nothing)."""
    pyg = min((v for v in (ms["pyg"], ms["pyg1"]) if v is not None), default=None)
    return ("yes" if all(v is None or base["median_ms"] / v <= 0.5 for v in (ms["jraphx"], pyg))
            else "no")


def print_graph_tables(results: list[dict], stream: dict) -> None:
    print(f"stream: {stream['batches']} batches x {stream['graphs_per_batch']} graphs, "
          f"{stream['nodes'][0]}-{stream['nodes'][1]} nodes and {stream['edges'][0]}-"
          f"{stream['edges'][1]} directed edges per batch")
    for r in results:
        if "pad" in r:
            n, e, gcount = r["pad"]
            print(f"{r['framework']}: padded to {n} nodes, {e} edges, {gcount} graph slots; "
                  f"{r['shape_keys']} distinct shape(s) over the stream")
    rows = [[r["framework"], f"{r['collate_ms']:.2f}", fmt(r["compiles"], "d"),
             fmt(r["compile_s"], ".2f"), f"{r['first_s']:.2f}", f"{r['median_ms']:.2f}",
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
        ms = {o: by[o]["median_ms"] if o in by else None for o in ("jraphx", "pyg", "pyg1")}
        jx = by.get("jraphx")
        ratio_rows.append([name, *(ratio(base["median_ms"], v) for v in ms.values()),
                           f"{base['compile_s']:.2f}" + ("" if jx is None
                                                         else f" / {jx['compile_s']:.2f}"),
                           _target(base, ms)])
    if ratio_rows:
        print_table(["gnncore variant", "step gnncore/JraphX", "step gnncore/PyG",
                     "step gnncore/PyG 1 thread", "compile s (all) gnncore / JraphX",
                     "target met (<=0.5 vs JraphX and best PyG)"], ratio_rows,
                    title="Graph classification ratios (median step; < 1: gnncore faster)")


if __name__ == "__main__":
    sys.exit(main())
