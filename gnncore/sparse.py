r"""A CSR view of the edges and the fused sum kernel built on it.

For ``sum`` and ``mean`` aggregation of weighted source features,

.. math::
    \mathbf{out}_i = \sum_{e = (j \to i)} w_e\, \mathbf{h}_j ,

gathering ``h[src]`` into an ``[E, F]`` array and scattering it back with
``segment_sum`` is the slow way on CPU: the benchmark
(``benchmarks/bench_aggregation.py``) measured a CSR sparse-dense product about
4x faster forward and over 10x faster forward + backward on a 10k-node,
100k-edge graph. :class:`Adjacency` carries the CSR structure of the edges in
both directions, built once on the host, so that :func:`spmm` runs ``A @ h``
forward and ``A^T @ ct`` backward, each as one native CSR product.

Layers take an ``Adjacency`` wherever they take ``edge_index`` (like PyG's
``SparseTensor``); :meth:`MessagePassing.propagate` then routes sum/mean
aggregations through :meth:`MessagePassing.message_and_aggregate`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gnncore.csr_kernel import csr_matmul
from gnncore.utils import to_device
from gnncore.xla import REDUCTIONS_IN_XLA

__all__ = ["SPARSE_FEATURES_MAX_DENSITY", "SPARSE_FEATURES_MIN_ENTRIES", "Adjacency",
           "DenseFeatures", "HeadBlock", "SparseFeatures", "apply_linear", "as_dense",
           "model_heads", "sparse_if_mostly_zero", "spmm"]

#: :func:`sparse_if_mostly_zero`: at most this fraction of the entries non-zero
SPARSE_FEATURES_MAX_DENSITY = 0.05
#: :func:`sparse_if_mostly_zero`: at least this many entries (nodes x features)
SPARSE_FEATURES_MIN_ENTRIES = 2 ** 18


@dataclasses.dataclass(frozen=True, eq=False)
class Adjacency:
    """Edges sorted by target, with CSR row pointers both ways. A pytree.

    Arguments:
        edge_index: ``[2, E]`` int32, sorted by target then source.
        indptr: ``[num_dst + 1]`` int32: edges into target ``i`` are
            ``indptr[i]:indptr[i+1]``.
        perm: ``[E]`` int32: the edges in source order (``edge_index[:, perm]``
            is sorted by source then target).
        t_indptr: ``[num_src + 1]`` int32: row pointers of that source order.
        num_src, num_dst: static sizes (equal for an ordinary graph).
        head_blocks: one :class:`HeadBlock` per entry of ``heads``: the index
            arrays of the products with that many attention heads, built once
            (:meth:`with_heads`); empty by default.
        heads: static: the head counts of ``head_blocks``.

    Build it on the host with :meth:`from_edge_index` (or use ``Graph.adj``).
    Per-edge arrays (``edge_weight``, ``edge_attr``) used with it must follow
    its edge order, which is the order ``Graph.from_arrays`` produces.
    """

    edge_index: Any
    indptr: Any
    perm: Any
    t_indptr: Any
    num_src: int = 0
    num_dst: int = 0
    head_blocks: tuple = ()
    heads: tuple = ()

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes: int | None = None, *,
                        size: tuple[int, int] | None = None) -> Adjacency:
        """Build from a target-sorted ``edge_index`` (host arrays, eager only).

        ``size=(num_src, num_dst)`` for a bipartite graph, else ``num_nodes``
        (default ``max index + 1``). Raises ``ValueError`` if the edges are not
        sorted by target then source: sort them together with their per-edge
        arrays first (``Graph.from_arrays`` does).
        """
        if isinstance(edge_index, jax.core.Tracer):
            raise ValueError("Adjacency.from_edge_index runs on the host, outside jit: "
                             "build it once and pass it to the compiled step")
        ei = np.asarray(edge_index).astype(np.int64).reshape(2, -1)
        if size is None:
            n = int(num_nodes) if num_nodes is not None else int(ei.max(initial=-1)) + 1
            size = (n, n)
        num_src, num_dst = int(size[0]), int(size[1])
        src, dst = ei
        if ei.shape[1] and (src.min() < 0 or src.max() >= num_src or dst.min() < 0
                            or dst.max() >= num_dst):
            raise ValueError(f"edge_index is out of range for size {(num_src, num_dst)}")
        key = dst * max(num_src, 1) + src
        if np.any(np.diff(key) < 0):
            raise ValueError("Adjacency needs edges sorted by target, then source; sort "
                             "edge_index (and its per-edge arrays) first, e.g. with "
                             "Graph.from_arrays")
        perm = np.lexsort((dst, src))
        return cls(edge_index=to_device(ei.astype(np.int32)),
                   indptr=to_device(_row_pointers(dst, num_dst)),
                   perm=to_device(perm.astype(np.int32)),
                   t_indptr=to_device(_row_pointers(src, num_src)),
                   num_src=num_src, num_dst=num_dst)

    @property
    def num_edges(self) -> int:
        return self.edge_index.shape[1]

    def in_degree(self):
        """Number of edges into each target, from the row pointers (no scatter)."""
        return (self.indptr[1:] - self.indptr[:-1]).astype(jnp.float32)

    def with_heads(self, *heads: int) -> Adjacency:
        """This adjacency with the index arrays of ``heads``-head products built
        once, on the host (eager only), for the attention layers (GAT, GATv2,
        Transformer) to use.

        An ``H``-head product runs as one CSR product over an ``[H * N, H * N]``
        block-diagonal matrix, whose ``H * E`` column indices a training step
        otherwise computes twice (forward and backward) on every call: an
        8-head GAT step on a 10k-node, 100k-edge graph is about a third shorter
        with them (``benchmarks/RESULTS.md``). Results are the same bit for bit;
        counts of 1 (one head needs no block) and counts already built are
        skipped. Build it again after changing the edges: the blocks are not
        updated with them.
        """
        arrays = (self.edge_index, self.indptr, self.perm, self.t_indptr)
        if any(isinstance(a, jax.core.Tracer) for a in arrays):
            raise ValueError("Adjacency.with_heads runs on the host, outside jit: call it "
                             "once and pass the result to the compiled step")
        new = sorted({int(h) for h in heads if int(h) > 1} - set(self.heads))
        if not new:
            return self
        if np.ndim(self.edge_index) != 2:
            raise ValueError("with_heads takes one graph's Adjacency (edge_index [2, E]), "
                             "not a stack of partitions")
        ei, indptr, perm, t_indptr = (np.asarray(a) for a in arrays)
        t_cols = ei[1][perm]
        blocks = tuple(HeadBlock(*(to_device(a) for a in (
            *_block_index(ei[0], indptr, h, self.num_src),
            *_block_index(t_cols, t_indptr, h, self.num_dst)))) for h in new)
        return dataclasses.replace(self, head_blocks=self.head_blocks + blocks,
                                   heads=self.heads + tuple(new))

    def for_model(self, model) -> Adjacency:
        """:meth:`with_heads` for :func:`model_heads` of ``model``: what its
        training step will use."""
        return self.with_heads(*model_heads(model))

    def head_block(self, heads: int) -> HeadBlock | None:
        """The :class:`HeadBlock` built for ``heads`` heads, or ``None``."""
        return self.head_blocks[self.heads.index(heads)] if heads in self.heads else None


def model_heads(model) -> tuple[int, ...]:
    """The head counts above 1 of the attention layers in ``model`` (an
    ``nnx.Module``), sorted, each once: the ones :meth:`Adjacency.with_heads`
    builds blocks for. A walk of the model's modules (about 0.4 ms for a
    two-layer GCN): a caller that prepares many adjacencies for one model keeps
    the result and calls :meth:`Adjacency.with_heads`."""
    from flax import nnx

    return tuple(sorted({m.heads for _, m in nnx.iter_modules(model)
                         if getattr(type(m), "has_heads", False)
                         and isinstance(getattr(m, "heads", None), int) and m.heads > 1}))


class HeadBlock(NamedTuple):
    """The index arrays of the ``[H * N, H * N]`` block-diagonal CSR matrix that
    runs an ``H``-head product as one (see :func:`_all_heads`): row pointers and
    column indices of ``A`` (``indptr``, ``cols``) and of ``A^T`` (``t_indptr``,
    ``t_cols``)."""

    indptr: Any
    cols: Any
    t_indptr: Any
    t_cols: Any


def _block_index(cols, indptr, heads: int, num_cols: int):
    """Row pointers and column indices of ``heads`` diagonal copies of the CSR
    matrix ``(cols, indptr)``: block ``k`` holds rows ``k * rows + i`` and
    columns ``k * num_cols + j``. Works on numpy and on traced arrays."""
    xp = np if isinstance(cols, np.ndarray) else jnp
    num_edges = cols.shape[0]
    head = xp.arange(heads, dtype=indptr.dtype)[:, None]
    big_indptr = xp.concatenate([(indptr[:-1][None, :] + head * num_edges).reshape(-1),
                                 xp.full((1,), heads * num_edges, indptr.dtype)])
    big_cols = (cols[None, :] + head * num_cols).reshape(-1)
    return big_indptr, big_cols


jax.tree_util.register_dataclass(
    Adjacency, data_fields=["edge_index", "indptr", "perm", "t_indptr", "head_blocks"],
    meta_fields=["num_src", "num_dst", "heads"])


def take_rows(x, index, *, indices_are_sorted: bool = False):
    """``x[index]`` along axis 0 for indices known to lie in ``[0, len(x))``, as
    an :class:`Adjacency`'s always do (it checks them when it is built).

    ``x[index]`` first maps negative indices (a compare, an add and a select
    per index) and ``jnp.take`` fills out-of-range rows with NaN (a mask and a
    select per element); both are work inside the loops that gather per-edge
    rows, the largest of a GAT training step. This is one plain gather; its
    gradient is one plain scatter-add."""
    x = jnp.asarray(x)
    dnums = jax.lax.GatherDimensionNumbers(offset_dims=tuple(range(1, x.ndim)),
                                           collapsed_slice_dims=(0,), start_index_map=(0,))
    return jax.lax.gather(x, index[:, None], dnums, (1,) + x.shape[1:],
                          indices_are_sorted=indices_are_sorted,
                          mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def take_edge_rows(x, index, adj: Adjacency | None, *, indices_are_sorted: bool = False):
    """``x[index]`` for a layer that takes either edge form: :func:`take_rows`
    when the edges came as an :class:`Adjacency` (``adj``; its indices are
    checked), else ``jnp.take``, whose out-of-range rows are NaN (an
    ``edge_index`` is the caller's, unchecked)."""
    if adj is None:
        return jnp.take(x, index, axis=0)
    return take_rows(x, index, indices_are_sorted=indices_are_sorted)


def _row_pointers(rows: np.ndarray, n: int) -> np.ndarray:
    counts = np.bincount(rows, minlength=n) if rows.size else np.zeros(n, np.int64)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)


def _all_heads(values, cols, indptr, shape, h, block=None):
    """``out[i, k] = sum over the CSR row i of values[e, k] * h[cols[e], k]`` for
    every head ``k`` in one native CSR product: the heads are the diagonal
    blocks of one ``[H * rows, H * cols]`` matrix (row ``k * rows + i``, column
    ``k * cols + j``). ``values`` [E, H], ``h`` [cols, H, C] -> [rows, H, C].

    One product instead of one per head (the native kernel takes plain 2-D
    operands only): a step with 8 heads compiled about 2 s faster this way than
    with 8 products, slices and a stack per direction. ``block``: the block
    matrix's ``(indptr, cols)`` built before (:meth:`Adjacency.with_heads`),
    else they are computed here."""
    num_heads, (rows, num_cols) = values.shape[1], shape
    if num_heads == 1:
        return csr_matmul(values[:, 0], cols, indptr, shape, h[:, 0])[:, None]
    big_indptr, big_cols = block or _block_index(cols, indptr, num_heads, num_cols)
    h2 = h.transpose(1, 0, 2).reshape(num_heads * num_cols, h.shape[2])
    out = csr_matmul(values.T.reshape(-1), big_cols, big_indptr,
                     (num_heads * rows, num_heads * num_cols), h2)
    return out.reshape(num_heads, rows, h.shape[2]).transpose(1, 0, 2)


def _by_rows(adj: Adjacency, values, h):
    """``A @ h`` as CSR products (CPU's native kernel: :func:`_all_heads`)."""
    block = adj.head_block(values.shape[1])
    return _all_heads(values, adj.edge_index[0], adj.indptr, (adj.num_dst, adj.num_src), h,
                      block and (block.indptr, block.cols))


def _by_rows_transposed(adj: Adjacency, values, ct):
    """``A^T @ ct``: the same product over the source-sorted copy."""
    block, shape = adj.head_block(values.shape[1]), (adj.num_src, adj.num_dst)
    values = take_rows(values, adj.perm)
    if block is not None:
        return _all_heads(values, None, adj.t_indptr, shape, ct, (block.t_indptr, block.t_cols))
    return _all_heads(values, take_rows(adj.edge_index[1], adj.perm), adj.t_indptr, shape, ct)


def _gather_sum(values, rows, take, into, num, *, sorted_take: bool, sorted_into: bool):
    """``out[into[e]] += values[e] * rows[take[e]]`` for every edge ``e``: a
    gather and a segment sum, per head (``values`` [E, H], ``rows`` [*, H, C])."""
    gathered = take_rows(rows, take, indices_are_sorted=sorted_take)
    return jax.ops.segment_sum(values[:, :, None] * gathered, into, num,
                               indices_are_sorted=sorted_into)


def _by_segments(adj: Adjacency, values, h):
    """``A @ h`` as a gather of the source rows and a sorted segment sum.

    On TPU, which has no CSR kernel: there the CSR product went through
    ``jax.experimental.sparse.BCSR``'s generic lowering, which compiled a
    10k-node, 100k-edge product with its gradient in 5.3 s (0.8 s this way)
    and ran it 1.5x slower (``benchmarks/RESULTS.md``)."""
    src, dst = adj.edge_index[0], adj.edge_index[1]
    return _gather_sum(values, h, src, dst, adj.num_dst, sorted_take=False, sorted_into=True)


def _by_segments_transposed(adj: Adjacency, values, ct):
    """``A^T @ ct`` the same way: gathered at the targets (sorted), summed at the sources."""
    src, dst = adj.edge_index[0], adj.edge_index[1]
    return _gather_sum(values, ct, dst, src, adj.num_src, sorted_take=True,
                       sorted_into=False)


# The form of each product, chosen when the step is lowered for a platform
# (jax.lax.platform_dependent: the compiler sees only the chosen one). Other
# platforms keep the CSR product (through BCSR: cuSPARSE on GPU).
_PRODUCT = {"cpu": _by_rows, "tpu": _by_segments, "default": _by_rows}
_PRODUCT_T = {"cpu": _by_rows_transposed, "tpu": _by_segments_transposed,
              "default": _by_rows_transposed}


@jax.custom_vjp
def _spmm_heads(adj: Adjacency, values, h):
    """``values`` [E, H], ``h`` [N_src, H, C] -> [N_dst, H, C]."""
    return jax.lax.platform_dependent(adj, values, h, **_PRODUCT)


def _spmm_heads_fwd(adj, values, h):
    return _spmm_heads(adj, values, h), (adj, values, h)


def _spmm_heads_bwd(res, ct):
    adj, values, h = res
    src, dst = adj.edge_index[0], adj.edge_index[1]
    # d h = A^T @ ct
    d_h = jax.lax.platform_dependent(adj, values, ct, **_PRODUCT_T)
    # d w_e = <ct[dst_e], h[src_e]>, all heads in one pass; XLA drops it when
    # the weights need no gradient. With reductions in XLA's own loops (see
    # gnncore.xla) a sum fuses with both gathers: 8-head GAT step on 10k/100k
    # 59-65 ms against 68-71 ms for the product with a ones vector; with
    # YNNPACK's reductions the sum kept the [E, H, C] product alive and the
    # step took 107 ms against 81 ms, so that case keeps the product.
    prod = take_rows(ct, dst, indices_are_sorted=True) * take_rows(h, src)
    if REDUCTIONS_IN_XLA:
        d_values = jnp.sum(prod, axis=-1)
    else:
        d_values = prod @ jnp.ones(prod.shape[-1], prod.dtype)
    return jax.tree.map(lambda _: None, adj), d_values, d_h


_spmm_heads.defvjp(_spmm_heads_fwd, _spmm_heads_bwd)


def spmm(adj: Adjacency, values, h):
    r"""``out[i] = sum over edges e = (j -> i) of values[e] * h[j]``.

    Arguments:
        adj: the :class:`Adjacency`.
        values: ``[E]`` edge weights, ``[E, H]`` one weight per edge and head, or
            ``None`` for all ones. Differentiable.
        h: ``[num_src, ...]`` source features (``[num_src, H, C]`` with per-head
            values). Differentiable.

    Returns:
        ``[num_dst, ...]``. Empty rows give 0.
    """
    h = jnp.asarray(h)
    dtype = jnp.promote_types(h.dtype, jnp.float32)
    h = h.astype(dtype)
    if values is None:
        values = jnp.ones((adj.num_edges,), dtype)
    values = values.astype(dtype)
    if values.ndim == 1:  # one head: features flattened to [N, F]
        out = _spmm_heads(adj, values[:, None], h.reshape(h.shape[0], 1, -1))
        return out.reshape((adj.num_dst,) + h.shape[1:])
    if h.ndim == 2:
        h = h[:, :, None]
        return _spmm_heads(adj, values, h)[:, :, 0]
    return _spmm_heads(adj, values, h.reshape(h.shape[0], h.shape[1], -1)).reshape(
        (adj.num_dst,) + h.shape[1:])


@dataclasses.dataclass(frozen=True, eq=False)
class SparseFeatures:
    """A mostly-zero node feature matrix ``[N, F]`` in CSR form. A pytree.

    Bag-of-words features (Cora: 1.3 % non-zero) make the first layer's dense
    ``x @ W`` the most expensive op of a training step; as CSR it costs the
    non-zeros only. Layers accept it wherever they take ``x`` and multiply it
    with their first weight matrix; layers that need the dense matrix itself
    (GIN, a residual) densify it. Build it with :meth:`from_dense`.

    Internally the matrix is an :class:`Adjacency` from feature columns to node
    rows, so ``x @ W`` is ``spmm(pattern, values, W)`` and its gradient with
    respect to ``W`` runs on the transposed CSR.
    """

    pattern: Adjacency
    values: Any

    @classmethod
    def from_dense(cls, x) -> SparseFeatures:
        """Build from a host array (eager only)."""
        if isinstance(x, jax.core.Tracer):
            raise ValueError("SparseFeatures.from_dense runs on the host, outside jit")
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 2:
            raise ValueError(f"features must be [num_nodes, F]; got shape {x.shape}")
        rows, cols = np.nonzero(x)  # row-major: sorted by node, then feature
        pattern = Adjacency.from_edge_index(np.stack([cols, rows]),
                                            size=(x.shape[1], x.shape[0]))
        return cls(pattern=pattern, values=to_device(x[rows, cols]))

    @property
    def shape(self) -> tuple[int, int]:
        return (self.pattern.num_dst, self.pattern.num_src)

    @property
    def dtype(self):
        return self.values.dtype

    def __matmul__(self, kernel):
        return spmm(self.pattern, self.values, kernel)

    def todense(self):
        # a scatter of the non-zeros (a product with an identity costs N·F·F)
        rows, cols = self.pattern.edge_index[1], self.pattern.edge_index[0]
        return jnp.zeros(self.shape, self.dtype).at[rows, cols].add(self.values)


jax.tree_util.register_dataclass(
    SparseFeatures, data_fields=["pattern", "values"], meta_fields=[])


@jax.custom_vjp
def _product_with_transposed(x, x_t, kernel):
    return x @ kernel


def _product_with_transposed_fwd(x, x_t, kernel):
    return x @ kernel, (x_t, kernel)


def _product_with_transposed_bwd(res, ct):
    x_t, kernel = res
    # d kernel = x^T @ ct from the stored copy, a row-major product; d x is
    # what plain autodiff gives; the copy is x's, so it gets no cotangent (None)
    return ct @ kernel.T, None, x_t @ ct


_product_with_transposed.defvjp(_product_with_transposed_fwd, _product_with_transposed_bwd)


@dataclasses.dataclass(frozen=True, eq=False)
class DenseFeatures:
    """A dense node feature matrix ``[N, F]`` with a transposed copy ``[F, N]``.
    A pytree.

    The first layer's weight gradient is ``x^T @ g``, a product over the nodes,
    the major axis of ``x``. On CPU XLA hands that form to a generic kernel
    about twice as slow as the row-major ``x @ W`` of the forward pass (Cora's
    1,433 features: 5.0-6.4 ms against 2.5-3.4 ms on a copy stored transposed;
    transposing inside the step costs more than it saves). With the copy made
    once on the host, the step multiplies ``x_t @ g`` instead: dense Cora's
    GAT and GCN steps took 14-20 % less (``benchmarks/RESULTS.md``, "dense
    features with a transposed copy"). It pays for wide features (hundreds of
    columns and more), at twice their memory; at 128 features it did not
    measurably help. Same values, same results; the gradient with respect to
    ``x`` is still ``g @ W^T``. Build it with :meth:`from_dense`.
    """

    x: Any
    x_t: Any

    @classmethod
    def from_dense(cls, x) -> DenseFeatures:
        """Build from a host array (eager only: the copy is made once, here)."""
        if isinstance(x, jax.core.Tracer):
            raise ValueError("DenseFeatures.from_dense copies the features on the host: "
                             "call it outside jit")
        x = np.asarray(x)
        if x.ndim != 2:
            raise ValueError(f"features must be [num_nodes, F]; got shape {x.shape}")
        return cls(x=to_device(x), x_t=to_device(np.ascontiguousarray(x.T)))

    @property
    def shape(self) -> tuple[int, int]:
        return self.x.shape

    @property
    def dtype(self):
        return self.x.dtype

    def __matmul__(self, kernel):
        return _product_with_transposed(self.x, self.x_t, kernel)

    def todense(self):
        return self.x


jax.tree_util.register_dataclass(DenseFeatures, data_fields=["x", "x_t"], meta_fields=[])


def sparse_if_mostly_zero(x, *, backend: str | None = None):
    """``x`` as a training step should take it: :class:`SparseFeatures` when it
    is a large, mostly-zero ``[N, F]`` matrix (at least
    :data:`SPARSE_FEATURES_MIN_ENTRIES` entries, at most
    :data:`SPARSE_FEATURES_MAX_DENSITY` of them non-zero) and the step runs on
    CPU, else ``x`` itself.

    ``backend``: where the step runs (default ``jax.default_backend()``). Only
    on CPU does the CSR form pay: on a TPU v5e Cora's steps were slower with its
    features as CSR than dense (GCN 3.00 against 1.98 ms, GAT 4.89 against
    4.04, GraphSAGE 3.55 against 1.54; ``benchmarks/RESULTS.md``).

    Bag-of-words features (Cora: 1.3 % non-zero) and one-hot node ids are such
    matrices; as CSR the first layer's product and its weight gradient cost the
    non-zeros only. A GCN step on one-hot features of 1,024 nodes took 0.67 ms
    as CSR against 2.8 ms dense, of 2,048 nodes 1.0 against 9.6 ms; at 128 and
    256 nodes the two were within noise of each other (``benchmarks/RESULTS.md``),
    hence the size floor. Runs on the host, outside jit (it counts non-zeros)."""
    if isinstance(x, SparseFeatures):
        return x
    if isinstance(x, jax.core.Tracer):
        raise ValueError("sparse_if_mostly_zero counts non-zeros on the host: call it "
                         "outside jit, on the concrete features")
    if (backend or jax.default_backend()) != "cpu":
        return x
    shape = np.shape(x)
    if len(shape) != 2 or shape[0] * shape[1] < SPARSE_FEATURES_MIN_ENTRIES:
        return x
    host = np.asarray(x)
    if host.dtype != np.float32:
        return x
    if np.count_nonzero(host) > SPARSE_FEATURES_MAX_DENSITY * host.size:
        return x
    return SparseFeatures.from_dense(host)


def as_dense(x):
    """``x`` as a dense array (densifies :class:`SparseFeatures`; the matrix of
    :class:`DenseFeatures`)."""
    return x.todense() if isinstance(x, (SparseFeatures, DenseFeatures)) else x


def apply_linear(lin, x):
    """Apply an ``nnx.Linear`` to dense features, :class:`SparseFeatures` or
    :class:`DenseFeatures`."""
    if not isinstance(x, (SparseFeatures, DenseFeatures)):
        return lin(x)
    out = x @ lin.kernel[...]
    return out if lin.bias is None else out + lin.bias[...]
