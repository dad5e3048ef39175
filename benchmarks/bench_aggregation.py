"""Aggregation-kernel study: ways to compute ``out[i] = sum_{j->i} w_ji * x[j]``.

That weighted gather + scatter is the core of GCN (and, with attention weights,
of GAT; with ``w = 1/deg`` of mean-SAGE). Each variant is timed jitted on CPU,
forward only and forward + backward (``jax.vjp`` w.r.t. ``x``: the backward
pass of a gather/scatter is a scatter/gather over the *other* endpoint, so its
index order matters too). All variants are checked against a float64 numpy
reference.

Usage (from the repository root)::

    python -m benchmarks.bench_aggregation           # both shapes, F = 64 and 16
    python -m benchmarks.bench_aggregation --quick
    python -m benchmarks.bench_aggregation --shapes cora --features 64 --only bcoo,seg_sorted_flag
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse

from benchmarks.common import GraphData, machine_info, print_table, shapes, versions

DENSE_MAX_NODES = 5000  # a dense [N, N] adjacency only for small graphs
PROMISE = jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS


# ----------------------------------------------------------------- CSR
# The CSR product with a custom VJP (``bcsr_vjp`` below) is the kernel gnncore
# adopted; ``bench_variants`` builds its prototype convs on these helpers.
def indptr(rows: np.ndarray, n: int) -> np.ndarray:
    """CSR row pointers of ``n`` rows for the sorted row indices ``rows``."""
    return np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int32)


def csr(rows, cols, vals, shape):
    """BCSR with entries ``vals`` at (rows, cols); rows must be sorted."""
    return sparse.BCSR((jnp.asarray(vals, jnp.float32), jnp.asarray(cols.astype(np.int32)),
                        jnp.asarray(indptr(rows, shape[0]))), shape=shape,
                       indices_sorted=True)


def csr_pair(rows, cols, vals, shape) -> dict:
    """{'a': M, 'at': M^T} as BCSR, from COO triples in any order."""
    o = np.lexsort((cols, rows))
    t = np.lexsort((rows, cols))
    return {"a": csr(rows[o], cols[o], vals[o], shape),
            "at": csr(cols[t], rows[t], vals[t], shape[::-1])}


@jax.custom_vjp
def spmm(op, x):
    """``op['a'] @ x`` with the backward ``op['at'] @ ct`` (constant matrix):
    both directions on JAX's native CPU CSR kernel."""
    return op["a"] @ x


def _spmm_fwd(op, x):
    return op["a"] @ x, op


def _spmm_bwd(op, ct):
    return None, op["at"] @ ct


spmm.defvjp(_spmm_fwd, _spmm_bwd)


# ----------------------------------------------------------------- kernels
# Each kernel is (description, prepare(host graph) -> pytree of device arrays,
# apply(x, prep) -> [N, F]). ``prepare`` runs once, outside the timing: it is
# what a library could precompute when the graph is built (sorting, CSR, ...).
def _edges(g: GraphData, order: str, rng):
    """(src, dst, w) in the requested order; w are GCN-like weights."""
    src, dst = g.edge_index[0].astype(np.int64), g.edge_index[1].astype(np.int64)
    deg = np.bincount(dst, minlength=g.num_nodes) + 1.0
    w = (1.0 / np.sqrt(deg[src] * deg[dst])).astype(np.float32)
    if order == "target":
        perm = np.lexsort((src, dst))
    elif order == "source":
        perm = np.lexsort((dst, src))
    elif order == "random":
        perm = rng.permutation(src.shape[0])
    else:
        raise ValueError(order)
    return src[perm].astype(np.int32), dst[perm].astype(np.int32), w[perm]


def _seg(order, *, sorted_flag, gather_mode=None, scatter_mode=None):
    def prepare(g, rng):
        src, dst, w = _edges(g, order, rng)
        return {"src": jnp.asarray(src), "dst": jnp.asarray(dst), "w": jnp.asarray(w)}

    def apply(x, p):
        n = x.shape[0]
        if gather_mode is None:
            xj = x[p["src"]]  # numpy-style indexing (negative-index fix-up + clip)
        else:
            xj = x.at[p["src"]].get(mode=gather_mode)
        msg = p["w"][:, None] * xj
        return jax.ops.segment_sum(msg, p["dst"], n, indices_are_sorted=sorted_flag,
                                   mode=scatter_mode)
    return prepare, apply


def _gnncore_path():
    """What gnncore's MessagePassing does today (GCNConv.message +
    MessagePassing.aggregate): jnp.take (fill mode) + segment_sum without the
    sorted flag, on target-sorted edges."""
    from gnncore.segment import segment_sum

    def prepare(g, rng):
        src, dst, w = _edges(g, "target", rng)
        return {"src": jnp.asarray(src), "dst": jnp.asarray(dst), "w": jnp.asarray(w)}

    def apply(x, p):
        xj = jnp.take(x, p["src"], axis=0)
        return segment_sum(p["w"][:, None] * xj, p["dst"], x.shape[0])
    return prepare, apply


def _custom_vjp_sorted():
    """Forward: target-sorted segment_sum. Backward: the transposed edge list,
    sorted by source, so the gradient is also a sorted segment_sum (no unsorted
    scatter anywhere)."""
    def prepare(g, rng):
        src, dst, w = _edges(g, "target", rng)
        perm = np.lexsort((dst, src))  # target order -> source order
        return {"src": jnp.asarray(src), "dst": jnp.asarray(dst), "w": jnp.asarray(w),
                "t_src": jnp.asarray(src[perm]), "t_dst": jnp.asarray(dst[perm]),
                "t_w": jnp.asarray(w[perm])}

    @jax.custom_vjp
    def spmm(x, p):
        xj = x.at[p["src"]].get(mode=PROMISE)
        return jax.ops.segment_sum(p["w"][:, None] * xj, p["dst"], x.shape[0],
                                   indices_are_sorted=True, mode=PROMISE)

    def fwd(x, p):
        return spmm(x, p), p

    def bwd(p, ct):
        # d out[dst] / d x[src] = w: gather the cotangent at the target, sum at the source.
        ctj = ct.at[p["t_dst"]].get(mode=PROMISE)
        gx = jax.ops.segment_sum(p["t_w"][:, None] * ctj, p["t_src"], ct.shape[0],
                                 indices_are_sorted=True, mode=PROMISE)
        return gx, None

    spmm.defvjp(fwd, bwd)
    return prepare, spmm


def _matmul(x, p):
    """The kernels that hold the whole operator as one matrix ``p['a']``."""
    return p["a"] @ x


def _bcoo(order):
    def prepare(g, rng):
        src, dst, w = _edges(g, order, rng)
        a = sparse.BCOO((jnp.asarray(w), jnp.asarray(np.stack([dst, src], 1))),
                        shape=(g.num_nodes, g.num_nodes), indices_sorted=order == "target")
        return {"a": a}
    return prepare, _matmul


def _bcsr():
    def prepare(g, rng):
        src, dst, w = _edges(g, "target", rng)
        return {"a": csr(dst, src, w, (g.num_nodes, g.num_nodes))}
    return prepare, _matmul


def _bcsr_vjp():
    """custom_vjp: forward BCSR(A) @ x, backward BCSR(A^T) @ ct. Both directions
    use JAX's native CPU CSR matmul kernel (``_csr_spmm_cpu_lowering``), so no
    [E, F] message array and no scatter is materialised. The transposed CSR
    (edges sorted by source) is built once on the host, like the sort by target."""
    def prepare(g, rng):
        src, dst, w = _edges(g, "target", rng)
        return csr_pair(dst, src, w, (g.num_nodes, g.num_nodes))

    def apply(x, p):
        return spmm(p, x)
    return prepare, apply


def _dense():
    def prepare(g, rng):
        src, dst, w = _edges(g, "target", rng)
        a = np.zeros((g.num_nodes, g.num_nodes), np.float32)
        np.add.at(a, (dst, src), w)
        return {"a": jnp.asarray(a)}
    return prepare, _matmul


def _ell():
    """Padded neighbour lists [N, max_in_degree]; pads point at node 0 with w = 0."""
    def prepare(g, rng):
        src, dst, w = _edges(g, "target", rng)
        deg = np.bincount(dst, minlength=g.num_nodes)
        k = int(deg.max())
        start = np.concatenate([[0], np.cumsum(deg)[:-1]])
        slot = np.arange(src.shape[0]) - start[dst]
        nbr = np.zeros((g.num_nodes, k), np.int32)
        wp = np.zeros((g.num_nodes, k), np.float32)
        nbr[dst, slot], wp[dst, slot] = src, w
        return {"nbr": jnp.asarray(nbr), "w": jnp.asarray(wp)}

    def apply(x, p):
        return jnp.einsum("nk,nkf->nf", p["w"], x[p["nbr"]])
    return prepare, apply


def _cumsum_csr():
    """Target-sorted messages, prefix sum over edges, difference at the CSR row
    pointers. No scatter at all; float32 prefix sums lose some precision."""
    def prepare(g, rng):
        src, dst, w = _edges(g, "target", rng)
        ptr = indptr(dst, g.num_nodes)
        return {"src": jnp.asarray(src), "w": jnp.asarray(w),
                "lo": jnp.asarray(ptr[:-1]), "hi": jnp.asarray(ptr[1:])}

    def apply(x, p):
        msg = p["w"][:, None] * x[p["src"]]
        c = jnp.concatenate([jnp.zeros((1, x.shape[1]), x.dtype), jnp.cumsum(msg, axis=0)])
        return c[p["hi"]] - c[p["lo"]]
    return prepare, apply


def _scipy_callback():
    """scipy.sparse CSR matmul through jax.pure_callback (host round trip),
    with the transposed CSR for the backward pass."""
    import scipy.sparse as sp

    state = {}

    def prepare(g, rng):
        src, dst, w = _edges(g, "target", rng)
        n = g.num_nodes
        a = sp.csr_matrix((w, (dst, src)), shape=(n, n))
        state["a"], state["at"] = a, a.T.tocsr()
        return {}

    def host(mat):
        return lambda x: np.asarray(state[mat] @ np.asarray(x), dtype=np.float32)

    @jax.custom_vjp
    def spmm(x, p):
        return jax.pure_callback(host("a"), jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    def fwd(x, p):
        return spmm(x, p), None

    def bwd(_, ct):
        return (jax.pure_callback(host("at"), jax.ShapeDtypeStruct(ct.shape, ct.dtype), ct),
                None)

    spmm.defvjp(fwd, bwd)
    return prepare, spmm


KERNELS = {
    "seg_unsorted": ("segment_sum, edges in random order", *_seg("random", sorted_flag=False)),
    "seg_sorted": ("segment_sum, target-sorted, flag off", *_seg("target", sorted_flag=False)),
    "seg_sorted_flag": ("segment_sum, target-sorted, indices_are_sorted=True",
                        *_seg("target", sorted_flag=True)),
    "seg_sorted_flag_promise": ("  + gather/scatter mode=promise_in_bounds",
                                *_seg("target", sorted_flag=True, gather_mode=PROMISE,
                                      scatter_mode=PROMISE)),
    "gnncore_path": ("gnncore today: jnp.take(fill) + segment_sum, sorted, flag off",
                     *_gnncore_path()),
    "custom_vjp_sorted": ("custom_vjp: sorted segment_sum both ways (src-sorted copy)",
                          *_custom_vjp_sorted()),
    "bcoo_unsorted": ("BCOO @ x (jax.experimental.sparse), random order", *_bcoo("random")),
    "bcoo": ("BCOO @ x, target-sorted, indices_sorted=True", *_bcoo("target")),
    "bcsr": ("BCSR @ x (native CPU CSR kernel fwd; bwd via BCOO)", *_bcsr()),
    "bcsr_vjp": ("custom_vjp: BCSR(A) @ x fwd, BCSR(A^T) @ ct bwd", *_bcsr_vjp()),
    "cumsum_csr": ("prefix sum over sorted messages, CSR differences", *_cumsum_csr()),
    "ell": ("ELL: padded neighbour lists [N, max_deg] gather", *_ell()),
    "dense": (f"dense adjacency matmul (N <= {DENSE_MAX_NODES})", *_dense()),
    "scipy_callback": ("scipy CSR via pure_callback (host)", *_scipy_callback()),
}


def reference(g: GraphData, x: np.ndarray, ct: np.ndarray):
    src, dst, w = _edges(g, "target", None)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)[:, None]
    out = np.zeros_like(x64)
    np.add.at(out, dst, w64 * x64[src])
    gx = np.zeros_like(x64)
    np.add.at(gx, src, w64 * ct.astype(np.float64)[dst])
    return out, gx


def time_fn(fn, args, reps):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        out.append(time.perf_counter() - t0)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument("--shapes", default="random,cora")
    p.add_argument("--features", default="64,16")
    p.add_argument("--only", default=",".join(KERNELS), help="comma list of kernel keys")
    p.add_argument("--reps", type=int, default=None,
                   help="timed calls per kernel and mode (default 60; 15 with --quick)")
    p.add_argument("--rounds", type=int, default=None,
                   help="blocks alternating between kernels (default 4; 2 with --quick)")
    args = p.parse_args(argv)
    reps = args.reps or (15 if args.quick else 60)
    rounds = max(1, min(reps, args.rounds or (2 if args.quick else 4)))
    keys = [k for k in args.only.split(",") if k]
    for k in keys:
        if k not in KERNELS:
            p.error(f"unknown kernel {k!r}; choose from {', '.join(KERNELS)}")

    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory']}; "
          f"python {info['python']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in
                                   versions(["jax", "jaxlib", "numpy", "scipy"]).items()))
    print(f"{reps} timed calls per cell, in {rounds} rounds alternating kernels; "
          "median ms; err = max |result - float64 reference| / max |reference|")
    rng = np.random.default_rng(0)
    t_start = time.perf_counter()
    for g in shapes([s for s in args.shapes.split(",") if s]):
        print(f"\nshape {g.name}: {g.num_nodes} nodes, {g.num_edges} edges -- {g.source}")
        for F in [int(f) for f in args.features.split(",") if f]:
            x_np = rng.standard_normal((g.num_nodes, F), dtype=np.float32)
            ct_np = rng.standard_normal((g.num_nodes, F), dtype=np.float32)
            ref_out, ref_gx = reference(g, x_np, ct_np)
            x, ct = jnp.asarray(x_np), jnp.asarray(ct_np)
            cells = {}
            for k in keys:
                if k == "dense" and g.num_nodes > DENSE_MAX_NODES:
                    continue
                _, prepare, apply = KERNELS[k]
                prep = prepare(g, np.random.default_rng(1))
                fwd = jax.jit(apply)

                def fb(x, prep, ct, apply=apply):
                    out, vjp = jax.vjp(lambda x_: apply(x_, prep), x)
                    return out, vjp(ct)[0]
                fwdbwd = jax.jit(fb)
                t0 = time.perf_counter()
                out = jax.block_until_ready(fwd(x, prep))
                t1 = time.perf_counter()
                out2, gx = jax.block_until_ready(fwdbwd(x, prep, ct))
                t2 = time.perf_counter()
                err_f = float(np.abs(np.asarray(out) - ref_out).max() / np.abs(ref_out).max())
                err_b = float(np.abs(np.asarray(gx) - ref_gx).max() / np.abs(ref_gx).max())
                cells[k] = {"fwd": (fwd, (x, prep)), "fb": (fwdbwd, (x, prep, ct)),
                            "compile": (t1 - t0, t2 - t1), "err": max(err_f, err_b),
                            "t_fwd": [], "t_fb": []}
                time_fn(fwd, (x, prep), 3)
                time_fn(fwdbwd, (x, prep, ct), 3)
            per_round = [reps // rounds + (i < reps % rounds) for i in range(rounds)]
            for n in per_round:
                for c in cells.values():
                    c["t_fwd"] += time_fn(*c["fwd"], n)
                    c["t_fb"] += time_fn(*c["fb"], n)
            base = cells.get("seg_unsorted")
            rows = []
            for k, c in cells.items():
                mf = 1e3 * statistics.median(c["t_fwd"])
                mb = 1e3 * statistics.median(c["t_fb"])
                rel = ("-" if base is None else
                       f"{mb / (1e3 * statistics.median(base['t_fb'])):.2f}")
                rows.append([k, KERNELS[k][0], f"{mf:.2f}", f"{mb:.2f}", rel,
                             f"{c['compile'][0] + c['compile'][1]:.2f}", f"{c['err']:.1e}"])
            print_table(["kernel", "what", "fwd ms", "fwd+bwd ms", "fwd+bwd vs unsorted",
                         "compile s", "err"], rows,
                        title=f"{g.name}, F={F} (N={g.num_nodes}, E={g.num_edges})")
            del cells
            gc.collect()
    print(f"\ntotal wall time {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
