"""The CSR path: the CSR kernel against ``jax.experimental.sparse``, ``spmm``
against segment_sum, ``Adjacency`` validation, and every
layer and model giving the same outputs and gradients with ``graph.adj`` as with
``graph.edge_index``."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.extend.core import jaxprs_in_params
from zoo import LAYERS, MODELS, build, sample_inputs

from gnncore import (
    Adjacency,
    DenseFeatures,
    GCNConv,
    Graph,
    SparseFeatures,
    segment_sum,
    sparse,
    sparse_if_mostly_zero,
    spmm,
)
from gnncore.csr_kernel import csr_matmul, csr_primitive
from gnncore.sparse import (
    SPARSE_FEATURES_MAX_DENSITY,
    SPARSE_FEATURES_MIN_ENTRIES,
    take_rows,
)

ALL = {**{f"layer:{k}": v for k, v in LAYERS.items() if k != "batch_norm"},
       **{f"model:{k}": v for k, v in MODELS.items()}}


def sorted_edges(rng, n_src, n_dst, e):
    ei = np.stack([rng.integers(0, n_src, e), rng.integers(0, n_dst, e)])
    return ei[:, np.lexsort((ei[0], ei[1]))]


def reference(ei, values, h, n_dst):
    msg = jnp.take(h, jnp.asarray(ei[0]), axis=0)
    if values is not None:
        msg = msg * values.reshape(values.shape + (1,) * (msg.ndim - values.ndim))
    return segment_sum(msg, jnp.asarray(ei[1]), n_dst)


@pytest.mark.parametrize("case", ["none", "edge", "heads", "bipartite", "empty",
                                  "heads-bipartite", "heads-empty"])
def test_spmm_matches_segment_sum_with_gradients(case):
    # heads: all heads run as one block-diagonal CSR product; a bipartite graph
    # (6 sources, 4 targets) checks the blocks' row and column offsets both ways
    rng = np.random.default_rng(0)
    bipartite, heads = "bipartite" in case, "heads" in case
    n_src, n_dst, e = (6, 4, 15) if bipartite else (7, 7, 0 if "empty" in case else 25)
    ei = sorted_edges(rng, n_src, n_dst, e)
    adj = Adjacency.from_edge_index(ei, size=(n_src, n_dst))
    num_heads = 3 if bipartite else 2
    h = jnp.asarray(rng.normal(size=(n_src, num_heads, 3) if heads else (n_src, 3)),
                    jnp.float32)
    values = (rng.normal(size=(e, num_heads)) if heads
              else None if case == "none" else rng.normal(size=e))
    values = None if values is None else jnp.asarray(values, jnp.float32)
    # the reference jitted too: eagerly, its every operation compiled a program
    want = jax.jit(lambda v, x: reference(ei, v, x, n_dst))(values, h)
    np.testing.assert_allclose(np.asarray(spmm(adj, values, h)), np.asarray(want), atol=1e-5)
    probe = jnp.asarray(rng.normal(size=(n_dst,) + h.shape[1:]), jnp.float32)

    def loss(fn, v, x):
        return jnp.sum(fn(v, x) * probe)

    fast = jax.jit(jax.grad(lambda v, x: loss(lambda a, b: spmm(adj, a, b), v, x),
                            argnums=(0, 1) if values is not None else 1))
    slow = jax.jit(jax.grad(lambda v, x: loss(lambda a, b: reference(ei, a, b, n_dst), v, x),
                            argnums=(0, 1) if values is not None else 1))
    for a, b in zip(jax.tree.leaves(fast(values, h)), jax.tree.leaves(slow(values, h))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)


@pytest.mark.parametrize("case", ["heads", "heads-bipartite", "heads-empty"])
def test_the_tpu_form_of_the_product_equals_the_cpu_form_both_ways(case):
    # on TPU the products are a gather and a segment sum (sparse._PRODUCT): the
    # same numbers as the CSR products, forward and transposed
    rng = np.random.default_rng(1)
    n_src, n_dst, e = (6, 4, 15) if "bipartite" in case else (7, 7, 0 if "empty" in case
                                                                else 25)
    adj = Adjacency.from_edge_index(sorted_edges(rng, n_src, n_dst, e), size=(n_src, n_dst))
    values = jnp.asarray(rng.normal(size=(e, 3)), jnp.float32)
    h = jnp.asarray(rng.normal(size=(n_src, 3, 2)), jnp.float32)
    ct = jnp.asarray(rng.normal(size=(n_dst, 3, 2)), jnp.float32)
    for form in ("tpu", "cpu"):
        assert sparse._PRODUCT[form](adj, values, h).shape == (n_dst, 3, 2)
        assert sparse._PRODUCT_T[form](adj, values, ct).shape == (n_src, 3, 2)
    np.testing.assert_allclose(np.asarray(sparse._PRODUCT["tpu"](adj, values, h)),
                               np.asarray(sparse._PRODUCT["cpu"](adj, values, h)), atol=1e-5)
    np.testing.assert_allclose(np.asarray(sparse._PRODUCT_T["tpu"](adj, values, ct)),
                               np.asarray(sparse._PRODUCT_T["cpu"](adj, values, ct)),
                               atol=1e-5)


def test_a_step_lowered_for_tpu_has_no_csr_kernel_and_for_cpu_has_it():
    # the form is chosen as the step is lowered: lowering for a TPU (possible on a
    # CPU-only machine) leaves out the CPU kernel's call, and lowering for CPU uses it
    rng = np.random.default_rng(2)
    adj = Adjacency.from_edge_index(sorted_edges(rng, 9, 9, 30), 9)
    values = jnp.asarray(rng.random(30), jnp.float32)
    h = jnp.asarray(rng.normal(size=(9, 4)), jnp.float32)
    step = jax.jit(jax.grad(lambda v, x: jnp.sum(spmm(adj, v, x) ** 2), argnums=(0, 1)))
    traced = step.trace(values, h)
    kernel = "cpu_csr_sparse_dense_ffi"
    assert traced.lower(lowering_platforms=("cpu",)).as_text().count(kernel) == 2  # A, A^T
    tpu = traced.lower(lowering_platforms=("tpu",)).as_text()
    # and not BCSR's generic product either (a dot_general over gathered blocks,
    # which compiled 6x longer there): sums of gathered rows
    assert kernel not in tpu and "stablehlo.dot_general" not in tpu
    assert "stablehlo.scatter" in tpu


def _random_csr(rows=13, cols=9, nnz=40, seed=0):
    rng = np.random.default_rng(seed)
    r, c = rng.integers(0, rows, nnz), rng.integers(0, cols, nnz)
    order = np.lexsort((c, r))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=rows))])
    values = rng.standard_normal(nnz).astype(np.float32)
    return (jnp.asarray(values[order]), jnp.asarray(c[order].astype(np.int32)),
            jnp.asarray(indptr.astype(np.int32)), (rows, cols))


def _bcsr_product(values, cols, indptr, shape, rhs):
    from jax.experimental import sparse as jsparse

    return jsparse.BCSR((values, cols, indptr), shape=shape, indices_sorted=True) @ rhs


def test_csr_kernel_equals_bcsr_eager_jitted_vmapped_and_differentiated():
    values, cols, indptr, shape = _random_csr()
    rhs = jax.random.normal(jax.random.key(1), (shape[1], 5))
    want = np.asarray(_bcsr_product(values, cols, indptr, shape, rhs))
    dense = np.zeros(shape, np.float32)
    rows = np.repeat(np.arange(shape[0]), np.diff(np.asarray(indptr)))
    np.add.at(dense, (rows, np.asarray(cols)), np.asarray(values))
    np.testing.assert_allclose(want, dense @ np.asarray(rhs), rtol=1e-5, atol=1e-5)
    # the same native kernel: bit for bit, eager and under jit
    np.testing.assert_array_equal(np.asarray(csr_matmul(values, cols, indptr, shape, rhs)), want)
    jitted = jax.jit(csr_matmul, static_argnums=3)
    np.testing.assert_array_equal(np.asarray(jitted(values, cols, indptr, shape, rhs)), want)
    assert "cpu_csr_sparse_dense_ffi" in jitted.lower(values, cols, indptr, shape, rhs).as_text()
    # vmap and forward-mode autodiff go through BCSR
    stacked = jnp.stack([rhs, 2 * rhs, -rhs])
    out = jax.vmap(lambda h: csr_matmul(values, cols, indptr, shape, h))(stacked)
    np.testing.assert_allclose(np.asarray(out), np.stack([want, 2 * want, -want]),
                               rtol=1e-5, atol=1e-5)
    f = lambda v, h: csr_matmul(v, cols, indptr, shape, h)
    g = lambda v, h: _bcsr_product(v, cols, indptr, shape, h)
    tangents = (jnp.ones_like(values), jnp.ones_like(rhs))
    for a, b in zip(jax.jvp(f, (values, rhs), tangents), jax.jvp(g, (values, rhs), tangents)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    # operands the native kernel does not take (here float16) go to BCSR, which
    # says that it falls back to its generic path
    with pytest.warns(Warning, match="cpu lowering not available"):
        half = csr_matmul(values.astype(jnp.float16), cols, indptr, shape,
                          rhs.astype(jnp.float16))
    assert half.dtype == jnp.float16
    np.testing.assert_allclose(np.asarray(half, np.float32), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype, width, given", [
    ("float32", 1, 8), ("float32", 7, 8), ("float32", 8, 8), ("float32", 23, 24),
    ("float32", 31, 32), ("float32", 32, 32), ("float32", 33, 33),
    ("float64", 3, 4), ("float64", 7, 8), ("float64", 8, 8), ("float64", 15, 15)])
def test_a_narrow_product_gives_the_kernel_whole_vectors_and_the_same_sums(dtype, width,
                                                                          given):
    # a narrow rhs reaches the kernel padded to whole vectors (2-5x faster there:
    # gnncore/csr_kernel.py); the zero columns change none of the product's own sums
    with jax.enable_x64(dtype == "float64"):
        values, cols, indptr, shape = _random_csr(rows=40, cols=30, nnz=200, seed=width)
        values = values.astype(dtype)
        rhs = jax.random.normal(jax.random.key(width), (shape[1], width), dtype)
        got = csr_matmul(values, cols, indptr, shape, rhs)  # (registers the kernel first)
        plain = csr_primitive.bind(values, cols, indptr, rhs, shape=shape)
        assert got.shape == (shape[0], width) and got.dtype == dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(plain))
        jaxpr = jax.make_jaxpr(lambda h: csr_matmul(values, cols, indptr, shape, h))(rhs)
    widths = [e.invars[3].aval.shape[1] for e in jaxpr.eqns if e.primitive is csr_primitive]
    assert widths == [given]


def test_a_trained_layer_on_the_csr_path_never_imports_scipy():
    """jax.experimental.sparse brings scipy.sparse (0.25-0.3 s); the kernel
    does not need it."""
    code = textwrap.dedent("""
        import sys
        import numpy as np
        from flax import nnx
        from gnncore import GAT, Graph, SparseFeatures
        edges = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])
        g = Graph.from_arrays(edges, np.eye(4, dtype=np.float32))
        m = GAT(4, 8, 2, num_layers=2, rngs=nnx.Rngs(0))
        x = SparseFeatures.from_dense(g.x)
        nnx.jit(nnx.grad(lambda m: m(x, g.adj).sum()))(m)
        print(sorted(n for n in sys.modules
                     if n.startswith(("scipy", "jax.experimental.sparse"))))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


def test_adjacency_structure_and_validation():
    ei = np.array([[1, 2, 0, 0], [0, 0, 1, 2]])
    adj = Adjacency.from_edge_index(ei, 3)
    assert np.asarray(adj.indptr).tolist() == [0, 2, 3, 4]
    assert np.asarray(adj.t_indptr).tolist() == [0, 2, 3, 4]
    assert np.asarray(adj.edge_index)[:, np.asarray(adj.perm)].tolist() == [[0, 0, 1, 2],
                                                                             [1, 2, 0, 0]]
    assert np.asarray(adj.in_degree()).tolist() == [2, 1, 1]
    with pytest.raises(ValueError, match="sorted by target, then source"):
        Adjacency.from_edge_index(ei[:, ::-1], 3)
    with pytest.raises(ValueError, match="out of range"):
        Adjacency.from_edge_index(ei, 2)
    with pytest.raises(ValueError, match="outside jit"):
        jax.jit(lambda e: Adjacency.from_edge_index(e, 3).indptr)(jnp.asarray(ei))


def test_graph_carries_its_adjacency():
    x, ei, ew, _ = sample_inputs()
    g = Graph.from_arrays(ei, x, edge_weight=ew)
    assert g.adj.edge_index is g.edge_index and g.adj.num_dst == g.num_nodes
    assert Graph.from_arrays(ei, x, sort_edges=False).adj is None


def graphs():
    x, ei, ew, ea = sample_inputs()
    rng = np.random.default_rng(3)
    yield "sample", Graph.from_arrays(ei, x, edge_weight=ew, edge_attr=ea)
    yield "no_edges", Graph.from_arrays(np.zeros((2, 0), int), x[:4],
                                        edge_weight=np.zeros(0), edge_attr=np.zeros((0, 3)))
    yield "one_node_loop", Graph.from_arrays([[0], [0]], x[:1], edge_weight=[2.0],
                                             edge_attr=rng.normal(size=(1, 3)))


GRAPHS = dict(graphs())


def _build_for(name, graph, edges):
    module, call = build(ALL[name])
    if isinstance(module, GCNConv) and module.cached:
        module.precompute_norm(edges, graph.num_nodes)
    return module, call


def assert_same_outputs_and_gradients(name, g, inputs):
    """Run the module of ``name`` (eval mode) on each ``(features, edges)`` pair in
    ``inputs``; every run must give the first run's output and parameter gradients.
    The runs are traced into one jitted program, so a case compiles once."""
    built = [_build_for(name, g, edges) for _, edges in inputs]
    modules = [module for module, _ in built]
    calls = [call for _, call in built]  # the jitted function closes over no module
    for module in modules:
        module.eval()

    @nnx.jit
    def run_all(modules):
        results = []
        for module, call, (feats, edges) in zip(modules, calls, inputs):
            def loss_fn(m, feats=feats, edges=edges, call=call):
                out = call(m, feats, edges, g.edge_weight, g.edge_attr)
                return jnp.sum(jnp.sin(out)), out

            (_, out), grads = nnx.value_and_grad(loss_fn, has_aux=True)(module)
            results.append((out, grads))
        return results

    results = [(out, nnx.to_flat_state(grads)) for out, grads in run_all(modules)]
    out_a, grads_a = results[0]
    for out_b, grads_b in results[1:]:
        np.testing.assert_allclose(np.asarray(out_b), np.asarray(out_a), atol=1e-5)
        for (path, a), (_, b) in zip(grads_a, grads_b):
            np.testing.assert_allclose(np.asarray(b.get_value()), np.asarray(a.get_value()),
                                       atol=1e-5, err_msg=str(path))


@pytest.mark.parametrize("graph_name", sorted(GRAPHS))
@pytest.mark.parametrize("name", sorted(ALL))
def test_adjacency_path_equals_edge_list_path(name, graph_name):
    g = GRAPHS[graph_name]
    assert_same_outputs_and_gradients(name, g, [(g.x, g.edge_index), (g.x, g.adj)])


@pytest.mark.parametrize("name, fused", [("gcn", True), ("gcn_raw", True),
                                         ("sage_mean", True), ("sage_sum_project", True),
                                         ("gin", True), ("gat", True), ("gat_edge_dim", True),
                                         ("sage_max_normalize", False)])
def test_linear_aggregations_use_the_csr_kernel(name, fused):
    g = GRAPHS["sample"]
    module, call = build(LAYERS[name])
    jaxpr = str(jax.make_jaxpr(lambda x: call(module, x, g.adj, g.edge_weight,
                                              g.edge_attr))(g.x))
    assert (csr_primitive.name in jaxpr) == fused
    jaxpr = str(jax.make_jaxpr(lambda x: call(module, x, g.edge_index, g.edge_weight,
                                              g.edge_attr))(g.x))
    assert csr_primitive.name not in jaxpr


@pytest.mark.parametrize("shape", [(7,), (7, 3), (7, 2, 4)])
@pytest.mark.parametrize("num", [0, 1, 12])
def test_take_rows_is_indexing_with_its_gradient(shape, num):
    """The plain gather the CSR paths use equals ``x[index]`` for in-range
    indices (repeated, unsorted, none at all), and so does its gradient."""
    rng = np.random.default_rng(num)
    x = jnp.asarray(rng.normal(size=shape), jnp.float32)
    index = jnp.asarray(rng.integers(0, shape[0], num), jnp.int32)
    cot = jnp.asarray(rng.normal(size=(num,) + shape[1:]), jnp.float32)
    np.testing.assert_array_equal(np.asarray(take_rows(x, index)), np.asarray(x)[np.asarray(index)])
    ordered = jnp.sort(index)
    np.testing.assert_array_equal(np.asarray(take_rows(x, ordered, indices_are_sorted=True)),
                                  np.asarray(x)[np.asarray(ordered)])
    grad = jax.grad(lambda x: jnp.sum(take_rows(x, index) * cot))(x)
    want = np.zeros(shape, np.float32)
    np.add.at(want, np.asarray(index), np.asarray(cot))
    np.testing.assert_allclose(np.asarray(grad), want, atol=1e-6)


def test_sparse_features_matmul_dense_and_validation():
    rng = np.random.default_rng(0)
    x = (rng.random((6, 9)) < 0.3) * rng.normal(size=(6, 9))
    sx = SparseFeatures.from_dense(x)
    kernel = jnp.asarray(rng.normal(size=(9, 4)), jnp.float32)
    assert sx.shape == (6, 9)
    np.testing.assert_allclose(np.asarray(sx @ kernel), x @ np.asarray(kernel), atol=1e-5)
    np.testing.assert_allclose(np.asarray(sx.todense()), x, atol=1e-6)
    g = jax.grad(lambda k: jnp.sum(jnp.sin(sx @ k)))(kernel)
    g_ref = jax.grad(lambda k: jnp.sum(jnp.sin(jnp.asarray(x, jnp.float32) @ k)))(kernel)
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), atol=1e-5)
    with pytest.raises(ValueError, match="\\[num_nodes, F\\]"):
        SparseFeatures.from_dense(np.ones(3))


def test_only_large_mostly_zero_features_become_csr():
    side = int(np.ceil(np.sqrt(SPARSE_FEATURES_MIN_ENTRIES)))  # side * side: just enough
    one_hot = np.eye(side, dtype=np.float32)
    sx = sparse_if_mostly_zero(one_hot)
    assert isinstance(sx, SparseFeatures) and sx.shape == one_hot.shape
    np.testing.assert_array_equal(np.asarray(sx.todense()), one_hot)
    assert sparse_if_mostly_zero(sx) is sx
    assert sparse_if_mostly_zero(jnp.asarray(one_hot)).shape == one_hot.shape  # a JAX array too
    assert isinstance(sparse_if_mostly_zero(jnp.asarray(one_hot)), SparseFeatures)
    # too small: the same matrix one row short of the floor stays dense
    small = one_hot[: (SPARSE_FEATURES_MIN_ENTRIES - 1) // side]
    assert sparse_if_mostly_zero(small) is small
    # too dense: one entry over the fraction
    dense = one_hot.copy()
    extra = int(SPARSE_FEATURES_MAX_DENSITY * dense.size) + 1 - side
    dense[np.unravel_index(np.flatnonzero(dense == 0)[:extra], dense.shape)] = 1.0
    assert np.count_nonzero(dense) == int(SPARSE_FEATURES_MAX_DENSITY * dense.size) + 1
    assert sparse_if_mostly_zero(dense) is dense
    # other dtypes and shapes are left alone (CSR features are float32)
    as64 = one_hot.astype(np.float64)
    assert sparse_if_mostly_zero(as64) is as64
    flat = np.zeros(SPARSE_FEATURES_MIN_ENTRIES, np.float32)
    assert sparse_if_mostly_zero(flat) is flat
    with pytest.raises(ValueError, match="outside jit"):
        jax.jit(sparse_if_mostly_zero)(jnp.asarray(one_hot))
    # CSR pays on CPU only: for a step on another backend the matrix stays dense
    assert sparse_if_mostly_zero(one_hot, backend="tpu") is one_hot
    assert isinstance(sparse_if_mostly_zero(one_hot, backend="cpu"), SparseFeatures)


@pytest.mark.parametrize("name", sorted(ALL))
def test_sparse_features_equal_dense_features(name):
    g = GRAPHS["sample"]
    rng = np.random.default_rng(5)
    x = np.asarray(g.x) * (rng.random(g.x.shape) < 0.4)
    assert_same_outputs_and_gradients(
        name, g, [(jnp.asarray(x), g.edge_index), (SparseFeatures.from_dense(x), g.adj)])


#: a layer of each way features come in: through the first weight matrix
#: (GCN, GAT, GATv2, SAGE's projection, SG), densified (GIN, EdgeConv, Cheb), and
#: a model with a residual and a norm
TRANSPOSED_COPY_CASES = ["layer:gcn", "layer:gat_edge_dim", "layer:gatv2", "layer:sage_mean",
                         "layer:sg_k2", "layer:gin", "layer:edge_conv", "layer:cheb_k3_rw",
                         "model:mixed_bn_residual_head"]


@pytest.mark.parametrize("name", TRANSPOSED_COPY_CASES)
def test_dense_features_with_a_transposed_copy_equal_plain_features(name):
    g = GRAPHS["sample"]
    assert_same_outputs_and_gradients(
        name, g, [(g.x, g.adj), (DenseFeatures.from_dense(g.x), g.adj)])


def test_dense_features_give_the_features_gradient_and_stay_on_the_host():
    g = GRAPHS["sample"]
    feats = DenseFeatures.from_dense(g.x)
    assert feats.shape == g.x.shape and feats.dtype == g.x.dtype
    np.testing.assert_array_equal(np.asarray(feats.x_t), np.asarray(g.x).T)
    layer = GCNConv(g.x.shape[1], 4, rngs=nnx.Rngs(0))
    loss = lambda m, x: jnp.sum(jnp.sin(m(x, g.adj)))
    want = nnx.grad(loss, argnums=1)(layer, g.x)
    for grad_fn in (nnx.grad(loss, argnums=1), nnx.jit(nnx.grad(loss, argnums=1))):
        got = grad_fn(layer, feats)
        np.testing.assert_allclose(np.asarray(got.x), np.asarray(want), atol=1e-6)
        assert not np.any(np.asarray(got.x_t))  # the copy is derived: no gradient of its own
    with pytest.raises(ValueError, match="outside jit"):
        jax.jit(DenseFeatures.from_dense)(g.x)
    with pytest.raises(ValueError, match="num_nodes, F"):
        DenseFeatures.from_dense(np.zeros(5, np.float32))


def _products_over_rows_of(jaxpr, shape):
    """The matrix products in ``jaxpr`` (nested ones included) with an operand
    of ``shape`` contracted over its first axis."""
    found = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (lhs_contract, rhs_contract), _ = eqn.params["dimension_numbers"]
            for var, contract in zip(eqn.invars, (lhs_contract, rhs_contract)):
                found += var.aval.shape == shape and 0 in contract
        for sub in jaxprs_in_params(eqn.params):
            found += _products_over_rows_of(sub, shape)
    return found


def test_the_weight_gradient_of_dense_features_multiplies_the_transposed_copy():
    """The point of the copy: no product contracts ``x`` over its nodes axis."""
    g = GRAPHS["sample"]
    graphdef, params = nnx.split(GCNConv(g.x.shape[1], 4, rngs=nnx.Rngs(0)))

    def loss(params, x):
        return jnp.sum(jnp.sin(nnx.merge(graphdef, params)(x, g.adj)))

    for feats, over_nodes in ((g.x, 1), (DenseFeatures.from_dense(g.x), 0)):
        jaxpr = jax.make_jaxpr(jax.grad(loss))(params, feats).jaxpr
        assert _products_over_rows_of(jaxpr, g.x.shape) == over_nodes


def test_gat_attention_dropout_draws_the_same_masks_on_both_paths():
    g = GRAPHS["sample"]
    outs = []
    for edges in (g.edge_index, g.adj):
        module, call = build(LAYERS["gat_dropout"])
        module.train()
        outs.append([np.asarray(call(module, g.x, edges, None, None)) for _ in range(2)])
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, atol=1e-5)
    assert not np.allclose(outs[0][0], outs[0][1])  # a fresh mask each step
