"""Full-training-step benchmark: gnncore vs JraphX vs PyTorch Geometric on CPU.

For each shape and model, every framework trains the same architecture on the
same graph (same edge list, sorted by target): forward + backward + Adam update,
built and timed by ``benchmarks/runners.py`` (JAX frameworks: one functional
``jax.jit`` step; PyG: eager torch with ``torch.optim.Adam``).

Usage (from the repository root)::

    python -m benchmarks.bench_layers            # full run (~1.5-4 min on 2 cores)
    python -m benchmarks.bench_layers --quick    # short smoke run
    python -m benchmarks.bench_layers --only gnncore,jraphx --models gcn --shapes cora
    python -m benchmarks.bench_layers --models gat --shapes cora --dense-features
    python -m benchmarks.bench_layers --models gat --dense-features transposed

Reported per row: first call (trace + compile + one step, JAX only), compile
(= first call - median step), the AOT breakdown of a second, fresh jit of the
same step (trace+lower and XLA compile), the median and min step time, and the
loss before and after the timed steps (a sanity check that the step trains).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from functools import partial

import numpy as np

from benchmarks.common import GraphData, load_average, shapes
from benchmarks.runners import (
    add_step_options,
    node_runner,
    print_machine,
    print_ratio_table,
    print_step_table,
    start_backends,
    step_settings,
    summarise,
    time_rows,
    two_layer_nnx,
    two_layer_torch,
    write_json,
)

MODELS = ("gcn", "gat", "sage")
HIDDEN = 64
GAT_HEADS = 8


# ---------------------------------------------------------------- models
def build_gnncore(kind: str, g: GraphData, seed: int, *, hidden: int = HIDDEN):
    from flax import nnx

    from gnncore import GCN, GNN, ConvSpec, GraphSAGE

    rngs = nnx.Rngs(seed)
    F, C = g.num_features, g.num_classes
    if kind == "gcn":
        return GCN(F, hidden, C, num_layers=2, dropout=0.0, rngs=rngs)
    if kind == "gat":
        # 8 heads x 8 per head, concatenated; output layer: 1 head, averaged.
        return GNN(F, [ConvSpec("gat", hidden, {"heads": GAT_HEADS}),
                       ConvSpec("gat", C, {"heads": 1, "concat": False})],
                   activation="elu", dropout=0.0, rngs=rngs)
    if kind == "sage":
        return GraphSAGE(F, hidden, C, num_layers=2, dropout=0.0, aggr="mean", rngs=rngs)
    raise ValueError(kind)


def build_jraphx(kind: str, g: GraphData, seed: int, *, hidden: int = HIDDEN):
    import jax
    from flax import nnx
    from jraphx.nn.conv import GATConv, GCNConv, SAGEConv

    rngs = nnx.Rngs(seed)
    F, C = g.num_features, g.num_classes
    if kind == "gcn":
        return two_layer_nnx(GCNConv(F, hidden, rngs=rngs), GCNConv(hidden, C, rngs=rngs),
                             jax.nn.relu)
    if kind == "gat":
        return two_layer_nnx(GATConv(F, hidden // GAT_HEADS, heads=GAT_HEADS, rngs=rngs),
                             GATConv(hidden, C, heads=1, concat=False, rngs=rngs), jax.nn.elu)
    if kind == "sage":
        return two_layer_nnx(SAGEConv(F, hidden, aggr="mean", rngs=rngs),
                             SAGEConv(hidden, C, aggr="mean", rngs=rngs), jax.nn.relu)
    raise ValueError(kind)


def build_pyg(kind: str, g: GraphData, seed: int, *, hidden: int = HIDDEN):
    import torch
    from torch_geometric.nn import GATConv, GCNConv, SAGEConv

    torch.manual_seed(seed)
    F, C = g.num_features, g.num_classes
    if kind == "gcn":
        return two_layer_torch(GCNConv(F, hidden), GCNConv(hidden, C), torch.relu)
    if kind == "gat":
        return two_layer_torch(GATConv(F, hidden // GAT_HEADS, heads=GAT_HEADS),
                               GATConv(hidden, C, heads=1, concat=False),
                               torch.nn.functional.elu)
    if kind == "sage":
        return two_layer_torch(SAGEConv(F, hidden, aggr="mean"),
                               SAGEConv(hidden, C, aggr="mean"), torch.relu)
    raise ValueError(kind)


BUILDERS = {"gnncore": build_gnncore, "jraphx": build_jraphx, "pyg": build_pyg}


def runner(fw: str, kind: str, g: GraphData, *, torch_threads: int = 1, seed: int = 0,
           dense_features: bool | str = False):
    """The runner of framework ``fw`` for model ``kind`` (gcn, gat, sage) on ``g``."""
    return node_runner(fw, kind, g, BUILDERS, torch_threads=torch_threads, seed=seed,
                       dense_features=dense_features)


def bench_case(kind: str, g: GraphData, frameworks: list[str], *, steps: int, warmup: int,
               rounds: int, breakdown: bool, torch_threads: int,
               dense_features: bool | str = False) -> list[dict]:
    """Time one (shape, model) for every framework, in alternating rounds."""
    makers = {fw: partial(runner, fw, kind, g, torch_threads=torch_threads,
                          dense_features=dense_features)
              for fw in frameworks}
    runners, results = time_rows(makers, steps=steps, warmup=warmup, rounds=rounds)
    return summarise(runners, results, breakdown=breakdown, label=f"{g.name:6s} {kind:4s}",
                     shape=g.name, model=kind)


def _target(base: dict, ms: dict) -> str:
    """'yes' when gnncore's step is <= 0.5 of JraphX's and of PyG's (2 threads),
    as printed (two decimals), and its compile <= 1 s."""
    ratios = [base["median_ms"] / v for v in (ms["jraphx"], ms["pyg"]) if v is not None]
    step_ok = all(float(f"{q:.2f}") <= 0.5 for q in ratios)
    return "yes" if step_ok and base["compile_s"] <= 1.0 else "no"


# ------------------------------------------------------------ roofline
ROOFLINE_MODELS = ("gcn", "sage")


def memory_bandwidth(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes per second this machine's memory moves, measured now: the best of
    ``repeats`` copies of a ``megabytes`` float32 array with numpy (each copy
    reads and writes the array: 2x its size)."""
    src = np.ones(megabytes * 2**20 // 4, np.float32)
    dst = np.empty_like(src)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best


def step_bytes(kind: str, g: GraphData, hidden: int = HIDDEN) -> int:
    """The bytes a 2-layer GCN / GraphSAGE training step (forward + backward +
    Adam, float32 values, int32 indices) must move at the least, with every
    array touched as few times as the algorithm allows:

    - the features: read twice (``x @ W1`` forward, ``x.T @ grad`` for ``dW1``);
    - per layer (input width ``a``, output ``b``): its output written and read
      back (forward, and the activation's backward), its output gradient
      written and read; the hidden input's gradient written (layer 2);
    - per layer, two passes over the CSR edges (the sum forward, its transpose
      backward), each reading the row pointers, the edge indices and weights,
      one gathered row of width ``b`` per edge, and writing ``N x b``;
    - the parameters (two weight matrices per SAGE layer), their gradients and
      Adam's two moments: each read and written once.

    A lower bound, not a model of any one implementation: the ratio of the
    measured step to ``step_bytes / bandwidth`` says how much is left."""
    f4 = 4
    n, e, f, c = g.num_nodes, g.num_edges, g.num_features, g.num_classes
    total = 2 * n * f * f4
    weights = 0
    for a, b in ((f, hidden), (hidden, c)):
        total += 4 * n * b * f4  # output: write, read; its gradient: write, read
        if a != f:
            total += n * a * f4  # the hidden input's gradient
        total += 2 * ((n + 1) * f4 + 2 * e * f4 + e * b * f4 + n * b * f4)
        weights += (2 if kind == "sage" else 1) * a * b + b
    return total + 2 * 4 * weights * f4  # params, grads, two moments: read + write


def print_roofline(results: list[dict], graphs: list[GraphData],
                   bandwidth: float) -> None:
    rows = [r for r in results if r["framework"] == "gnncore" and r["model"] in ROOFLINE_MODELS]
    if not rows:
        return
    by_name = {g.name: g for g in graphs}
    print(f"\nRoofline (memory bandwidth measured in this run: {bandwidth / 1e9:.1f} GB/s, a "
          "256 MB numpy copy, best of 5)")
    print("| shape  | model | bytes a step must move | at bandwidth, ms | gnncore median ms "
          "| measured / roofline |")
    print("|--------|-------|------------------------|------------------|-------------------"
          "|---------------------|")
    for r in rows:
        need = step_bytes(r["model"], by_name[r["shape"]])
        bound_ms = 1e3 * need / bandwidth
        ratio = r["median_ms"] / bound_ms
        print(f"| {r['shape']:<6} | {r['model']:<5} | {need / 2**20:>19.1f} MB | "
              f"{bound_ms:>16.2f} | {r['median_ms']:>17.2f} | {ratio:>18.1f}x |")
        r["roofline_ms"] = bound_ms


# ---------------------------------------------------------------- main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_step_options(p, quick_help="few steps, no AOT breakdown (a smoke run)")
    p.add_argument("--models", default=",".join(MODELS), help="comma list: gcn,gat,sage")
    p.add_argument("--shapes", default="random,cora", help="comma list: random,cora")
    p.add_argument("--dense-features", nargs="?", const="plain", default=None,
                   choices=("plain", "transposed"),
                   help="give gnncore mostly-zero features (Cora's) dense too, as the "
                        "peers get them, instead of as SparseFeatures; 'transposed': as "
                        "gnncore.DenseFeatures, the same matrix with a transposed copy "
                        "for the first layer's weight gradient")
    args = p.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            p.error(f"unknown model {m!r}")
    cfg = step_settings(p, args)

    t_start = time.perf_counter()
    info, vers = print_machine()
    graphs = shapes([s for s in args.shapes.split(",") if s])
    for g in graphs:
        print(f"shape {g.name}: {g.num_nodes} nodes, {g.num_edges} edges, "
              f"{g.num_features} features, {g.num_classes} classes -- {g.source}")
    print(f"steps: {cfg.steps} timed (in {cfg.rounds} rounds alternating frameworks) after "
          f"{cfg.warmup} warm-up; loss over all nodes; dropout 0")
    print({None: "features: on CPU gnncore takes mostly-zero features as SparseFeatures "
                 "(--dense-features: dense, as the peers)",
           "plain": "features: dense for every framework",
           "transposed": "features: dense for every framework; gnncore's as DenseFeatures "
                         "(with a transposed copy, made before timing)"}[args.dense_features])
    start_backends(cfg.frameworks, cfg.torch_threads)

    results = []
    for g in graphs:
        for kind in models:
            results += bench_case(kind, g, cfg.frameworks, steps=cfg.steps, warmup=cfg.warmup,
                                  rounds=cfg.rounds, breakdown=cfg.breakdown,
                                  torch_threads=cfg.torch_threads,
                                  dense_features=args.dense_features or False)
    backend = "cpu"
    if any(f in ("gnncore", "jraphx") for f in cfg.frameworks):
        import jax

        backend = jax.default_backend()
    print_step_table(results, title="Training step (forward + backward + Adam), "
                     + backend.upper())
    print_ratio_table(results, graphs, models, target=_target,
                      target_header="target met (<=0.5, <=1 s)",
                      title="Ratios (median step time; < 1 means gnncore is faster)")
    bandwidth = None
    if backend == "cpu":
        bandwidth = memory_bandwidth()
        print_roofline(results, graphs, bandwidth)
    else:  # the bound is the host's memory bandwidth: a CPU step's
        print(f"\nRoofline: not printed (the steps ran on {backend}, not on the host whose "
              "memory bandwidth it is measured against)")
    print(f"\ntotal wall time {time.perf_counter() - t_start:.0f} s; "
          f"load average now {load_average()}")
    if args.json:
        write_json(args.json, {"machine": info, "versions": vers, "steps": cfg.steps,
                               "bandwidth_bytes_per_s": bandwidth, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
