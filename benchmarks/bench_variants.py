"""What-if study: prototype kernels for gnncore, timed in the full training step.

Not part of the library and not a proposal for its API: each prototype
subclasses a gnncore conv (same parameters, same initialisation, so the first
loss must equal the baseline's) and swaps only the aggregation (and, where
marked, the input-feature matmul). The numbers support the recommendations in
``benchmarks/README.md``.

Prototypes:

* ``csr``: the graph operator is precomputed on the host once (like
  ``GCNConv(cached=True)``) as two ``jax.experimental.sparse.BCSR`` matrices,
  ``A`` (rows = targets) and ``A^T`` (rows = sources). A ``jax.custom_vjp`` runs
  ``A @ h`` forward and ``A^T @ ct`` backward, both on JAX's native CPU CSR
  kernel; GCN's self-loops become a diagonal term ``loop_w * h`` instead of N
  appended edges. GAT keeps its attention (segment softmax over target-sorted
  edges with ``indices_are_sorted=True``) and aggregates per head with
  ``BCSR(alpha_h) @ h_h``; the custom backward adds the attention gradient
  ``d alpha_e = <ct[dst_e], h[src_e]>``.
* ``+sparse-x``: additionally multiplies the (binary, 1.3 % dense) Cora features
  as a CSR matrix: ``X @ W`` forward, ``X^T @ g`` for the weight gradient.

Usage (from the repository root)::

    python -m benchmarks.bench_variants [--quick] [--steps N] [--shapes random,cora]
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.experimental import sparse

from benchmarks.bench_aggregation import csr_pair, indptr, spmm
from benchmarks.bench_layers import build_gnncore, build_jraphx
from benchmarks.common import GraphData, machine_info, median_ms, print_table, shapes, versions
from benchmarks.runners import JaxRunner, time_rows, two_layer_nnx
from gnncore import GATConv, GCNConv, Graph, SAGEConv, SparseFeatures, sparse_if_mostly_zero
from gnncore.segment import segment_softmax


# ------------------------------------------------------------ CSR operators
# csr_pair, indptr and the custom-VJP spmm: bench_aggregation's ``bcsr_vjp`` kernel.
def gcn_operator(g: GraphData) -> dict:
    """D^-1/2 (A + I) D^-1/2 as an off-diagonal CSR pair plus a diagonal."""
    src, dst = g.edge_index[0].astype(np.int64), g.edge_index[1].astype(np.int64)
    n = g.num_nodes
    off = src != dst  # an existing self-loop would be replaced by the added one
    src, dst = src[off], dst[off]
    deg = np.bincount(dst, minlength=n) + 1.0
    dinv = 1.0 / np.sqrt(deg)
    op = csr_pair(dst, src, dinv[src] * dinv[dst], (n, n))
    op["loop"] = jnp.asarray(dinv * dinv, jnp.float32)
    return op


def mean_operator(g: GraphData) -> dict:
    """Row-normalised adjacency (mean over in-neighbours) as a CSR pair."""
    src, dst = g.edge_index[0].astype(np.int64), g.edge_index[1].astype(np.int64)
    deg = np.bincount(dst, minlength=g.num_nodes)
    return csr_pair(dst, src, 1.0 / np.maximum(deg[dst], 1), (g.num_nodes, g.num_nodes))


def gat_operator(g: GraphData) -> dict:
    """Edges + one self-loop per node, sorted by target; CSR structure both ways."""
    n = g.num_nodes
    src, dst = g.edge_index[0].astype(np.int64), g.edge_index[1].astype(np.int64)
    keep = src != dst
    src = np.concatenate([src[keep], np.arange(n)])
    dst = np.concatenate([dst[keep], np.arange(n)])
    o = np.lexsort((src, dst))
    src, dst = src[o], dst[o]
    perm = np.lexsort((dst, src))  # target order -> source order
    i32 = lambda a: jnp.asarray(a.astype(np.int32))  # noqa: E731
    return {"src": i32(src), "dst": i32(dst), "indptr": jnp.asarray(indptr(dst, n)),
            "perm": i32(perm), "t_cols": i32(dst[perm]),
            "t_indptr": jnp.asarray(indptr(src[perm], n))}


@jax.custom_vjp
def spmm_values(op, vals, h):
    """``A(vals) @ h`` for the GAT structure; differentiable in ``vals`` and ``h``."""
    n = h.shape[0]
    return sparse.BCSR((vals, op["src"], op["indptr"]), shape=(n, n),
                       indices_sorted=True) @ h


def _spmm_values_fwd(op, vals, h):
    return spmm_values(op, vals, h), (op, vals, h)


def _spmm_values_bwd(res, ct):
    op, vals, h = res
    n = h.shape[0]
    d_vals = jnp.sum(ct[op["dst"]] * h[op["src"]], axis=-1)
    at = sparse.BCSR((vals[op["perm"]], op["t_cols"], op["t_indptr"]), shape=(n, n),
                     indices_sorted=True)
    return None, d_vals, at @ ct


spmm_values.defvjp(_spmm_values_fwd, _spmm_values_bwd)


def sparse_features(x: np.ndarray) -> dict:
    rows, cols = np.nonzero(x)
    return csr_pair(rows, cols, x[rows, cols], x.shape)


def xw(x, kernel):
    """``x @ kernel`` for a dense x, or the CSR pair from :func:`sparse_features`."""
    return spmm(x, kernel) if isinstance(x, dict) else x @ kernel


# ------------------------------------------------------------ prototype convs
class CSRGCNConv(GCNConv):
    def __call__(self, x, op, edge_weight=None):
        h = xw(x, self.lin.kernel[...])
        out = spmm(op, h) + op["loop"][:, None] * h
        return out + self.bias[...]


class CSRSAGEConv(SAGEConv):
    def __call__(self, x, op):
        out = spmm(op, xw(x, self.lin_l.kernel[...])) + self.lin_l.bias[...]
        return out + xw(x, self.lin_r.kernel[...])


class CSRGATConv(GATConv):
    def __call__(self, x, op, edge_attr=None):
        H, C = self.heads, self.out_features
        h = xw(x, self.lin.kernel[...]).reshape(-1, H, C)
        n = h.shape[0]
        a_src = jnp.sum(h * self.att_src[...], axis=-1)
        a_dst = jnp.sum(h * self.att_dst[...], axis=-1)
        logits = jax.nn.leaky_relu(a_src[op["src"]] + a_dst[op["dst"]], self.negative_slope)
        alpha = segment_softmax(logits, op["dst"], n, indices_are_sorted=True)
        out = jnp.stack([spmm_values(op, alpha[:, k], h[:, k]) for k in range(H)], axis=1)
        out = out.reshape(n, H * C) if self.concat else out.mean(axis=1)
        return out + self.bias[...]


def build_csr(kind: str, g: GraphData, seed: int = 0):
    """Same layer classes' __init__ (same parameter shapes, same RNG order) as
    ``build_gnncore``; only ``__call__`` differs."""
    rngs = nnx.Rngs(seed)
    F, C, H = g.num_features, g.num_classes, 64
    if kind == "gcn":
        return two_layer_nnx(CSRGCNConv(F, H, rngs=rngs), CSRGCNConv(H, C, rngs=rngs),
                        jax.nn.relu), gcn_operator(g)
    if kind == "sage":
        return two_layer_nnx(CSRSAGEConv(F, H, rngs=rngs), CSRSAGEConv(H, C, rngs=rngs),
                        jax.nn.relu), mean_operator(g)
    if kind == "gat":
        return two_layer_nnx(CSRGATConv(F, 8, heads=8, rngs=rngs),
                        CSRGATConv(H, C, heads=1, concat=False, rngs=rngs),
                        jax.nn.elu), gat_operator(g)
    raise ValueError(kind)


# ------------------------------------------------------------ timing
def variants(kind: str, g: GraphData, with_jraphx: bool) -> dict:
    """{name: a function that builds that variant's runner}."""
    graph = Graph.from_arrays(g.edge_index, g.x, y=g.y)
    x, ei, y = graph.x, graph.edge_index, graph.y
    out = {}
    if with_jraphx:
        out["jraphx"] = lambda: JaxRunner(build_jraphx(kind, g, 0), [
            (jnp.asarray(g.x), jnp.asarray(g.edge_index), jnp.asarray(g.y))])
    out["gnncore"] = lambda: JaxRunner(build_gnncore(kind, g, 0), [(x, ei, y)])
    if kind == "gcn":
        def cached():
            m = build_gnncore(kind, g, 0)
            for conv in m.convs:
                conv.cached = True
                conv.precompute_norm(ei, g.num_nodes)
            return JaxRunner(m, [(x, ei, y)])
        out["gnncore cached=True"] = cached
    out["csr"] = lambda: _csr_runner(kind, g, x, y)
    if isinstance(sparse_if_mostly_zero(g.x), SparseFeatures):  # gnncore's own rule
        out["csr +sparse-x"] = lambda: _csr_runner(kind, g, sparse_features(g.x), y)
    return out


def _csr_runner(kind, g, x, y):
    model, op = build_csr(kind, g)
    return JaxRunner(model, [(x, op, y)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--steps", type=int, default=None, help="default 40; 10 with --quick")
    p.add_argument("--rounds", type=int, default=None, help="default 4; 2 with --quick")
    p.add_argument("--models", default="gcn,sage,gat")
    p.add_argument("--shapes", default="random,cora")
    p.add_argument("--no-jraphx", action="store_true", help="skip the JraphX reference rows")
    args = p.parse_args(argv)
    steps = args.steps or (10 if args.quick else 40)
    rounds = max(1, min(steps, args.rounds or (2 if args.quick else 4)))
    warmup = 2 if args.quick else 5

    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in
                                   versions(["jax", "flax", "jraphx"]).items()))
    print(f"{steps} timed steps in {rounds} rounds alternating variants, after {warmup} warm-up")
    jax.block_until_ready(jax.jit(lambda a: a + 1)(jnp.ones(3)))
    rows = []
    t_start = time.perf_counter()
    for g in shapes([s for s in args.shapes.split(",") if s]):
        print(f"shape {g.name}: {g.num_nodes} nodes, {g.num_edges} edges, "
              f"{g.num_features} features -- {g.source}")
        for kind in [m for m in args.models.split(",") if m]:
            runners, res = time_rows(variants(kind, g, not args.no_jraphx), steps=steps,
                                     warmup=warmup, rounds=rounds)
            base = median_ms(res["gnncore"]["times"])
            ref = median_ms(res["jraphx"]["times"]) if "jraphx" in res else None
            for name, r in res.items():
                m = median_ms(r["times"])
                rows.append([g.name, kind, name, f"{r['first_s']:.2f}", f"{m:.2f}",
                             f"{m / base:.2f}", "-" if ref is None else f"{m / ref:.2f}",
                             f"{r['loss0']:.5f}"])
                print(f"  done {g.name} {kind} {name}: {m:.2f} ms", flush=True)
            del runners
    print_table(["shape", "model", "variant", "first call s", "median step ms",
                 "vs gnncore", "vs JraphX", "first loss"], rows,
                title="Prototype kernels in the full training step (same init => same "
                      "first loss as gnncore)")
    print(f"\ntotal wall time {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
