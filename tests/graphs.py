"""Graph builders and parameter randomisers shared by the tests.

Every builder draws from its own ``np.random.default_rng(seed)`` in a fixed
order, so a test that calls it with the same arguments sees the same numbers
wherever it lives. Helpers that draw differently have different names (for
example :func:`randomise` and :func:`randomise_affine`); do not merge them
without checking that every caller still draws the same values.

Graphs are ``(2, E)`` edge-index arrays (source row first) unless said
otherwise; drawings (:class:`explorer.drawing.Drawing`) are imported lazily, so
the library's tests do not import the app.
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from gnncore import Graph, from_networkx


# --------------------------------------------------------------------------- edges
def random_graph(seed, n, e, loops=2, dups=2):
    """Random directed edges on ``n`` nodes, plus ``loops`` extra self-loops and
    ``dups`` duplicated edges, columns shuffled. Draws, in order: ``e``
    sources, ``e`` targets, the loop nodes, the duplicated columns, the
    permutation."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    loop_nodes = rng.integers(0, n, loops)
    src, dst = np.concatenate([src, loop_nodes]), np.concatenate([dst, loop_nodes])
    pick = rng.integers(0, len(src), dups)
    src, dst = np.concatenate([src, src[pick]]), np.concatenate([dst, dst[pick]])
    perm = rng.permutation(len(src))
    return np.stack([src[perm], dst[perm]])


def undirected(seed, n, e):
    """:func:`random_graph` without loops or duplicates, loops dropped, every
    edge in both directions."""
    ei = random_graph(seed, n, e, loops=0, dups=0)
    ei = ei[:, ei[0] != ei[1]]
    return np.concatenate([ei, ei[::-1]], axis=1)


def union(parts, seed):
    """Disjoint union of ``(num_nodes, edge_index)`` parts, edge columns
    shuffled: ``(total_nodes, edge_index)``."""
    offset, cols = 0, []
    for n, ei in parts:
        cols.append(np.asarray(ei).reshape(2, -1) + offset)
        offset += n
    ei = np.concatenate(cols, axis=1)
    return offset, ei[:, np.random.default_rng(seed).permutation(ei.shape[1])]


# ------------------------------------------------------------------ node and edge data
def features(seed, n, f):
    """``[n, f]`` standard-normal float32 features."""
    return np.random.default_rng(seed).normal(size=(n, f)).astype(np.float32)


def edge_weight(seed, edge_index):
    """Positive weights in [0.2, 2); the self-loops of one node share a weight,
    so "the node's loop weight" (kept once by GCN's normalisation) is well
    defined."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.2, 2.0, edge_index.shape[1])
    n = int(edge_index.max(initial=0)) + 1
    node_loop_w = rng.uniform(0.2, 2.0, n)
    loop = edge_index[0] == edge_index[1]
    w[loop] = node_loop_w[edge_index[0, loop]]
    return w.astype(np.float32)


# ------------------------------------------------------------ whole graphs, as dicts
def make_graph(kind: str, seed: int = 0, *, num_nodes: int = 14, num_features: int = 5,
               edge_dim: int = 3) -> dict:
    """A small random directed graph, edges in random (unsorted) order, as a dict
    of ``x``, ``edge_index`` (int32), ``edge_weight`` and ``edge_attr``.

    ``basic``: nodes ``n-2`` and ``n-1`` are isolated, node ``n-3`` only sends,
    four edges are duplicated, no self-loops. ``loops``: ``basic`` plus
    self-loops on nodes 0 and 3 (node 3's loop twice, with equal weights so the
    kept weight is well defined) and on node ``n-1``, which has no other edge.
    ``empty``: no edges at all.
    """
    rng = np.random.default_rng(seed)
    n = num_nodes
    x = rng.normal(size=(n, num_features)).astype(np.float32)
    if kind == "empty":
        ei = np.zeros((2, 0), np.int32)
        return {"x": x, "edge_index": ei, "edge_weight": np.zeros((0,), np.float32),
                "edge_attr": np.zeros((0, edge_dim), np.float32)}
    core = n - 3  # nodes 0 .. n-4 exchange edges
    src = rng.integers(0, core, size=30)
    dst = rng.integers(0, core, size=30)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    src = np.concatenate([src, [n - 3, n - 3]])  # a node with out-edges only
    dst = np.concatenate([dst, [0, 1]])
    dup = rng.choice(src.shape[0], size=4, replace=False)
    src, dst = np.concatenate([src, src[dup]]), np.concatenate([dst, dst[dup]])
    w = rng.uniform(0.5, 2.0, size=src.shape[0])
    if kind == "loops":
        loops = np.array([0, 3, 3, n - 1])
        src, dst = np.concatenate([src, loops]), np.concatenate([dst, loops])
        lw = rng.uniform(0.5, 2.0, size=4)
        lw[2] = lw[1]  # the duplicated loop carries the same weight
        w = np.concatenate([w, lw])
    elif kind != "basic":
        raise ValueError(kind)
    perm = rng.permutation(src.shape[0])
    ei = np.stack([src, dst])[:, perm].astype(np.int32)
    return {"x": x, "edge_index": ei, "edge_weight": w[perm].astype(np.float32),
            "edge_attr": rng.normal(size=(ei.shape[1], edge_dim)).astype(np.float32)}


def make_bipartite(seed: int = 0, num_src: int = 9, num_dst: int = 6, f_src: int = 5,
                   f_dst: int = 4, edge_dim: int = 3) -> dict:
    """Bipartite graph as a dict of ``x`` (a (source, target) pair), ``edge_index``
    and ``edge_attr``: 20 random edges plus 3 duplicated; target ``num_dst - 1``
    receives nothing."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_src, size=20)
    dst = rng.integers(0, num_dst - 1, size=20)
    src, dst = np.concatenate([src, src[:3]]), np.concatenate([dst, dst[:3]])
    return {
        "x": (rng.normal(size=(num_src, f_src)).astype(np.float32),
              rng.normal(size=(num_dst, f_dst)).astype(np.float32)),
        "edge_index": np.stack([src, dst]).astype(np.int32),
        "edge_attr": rng.normal(size=(src.shape[0], edge_dim)).astype(np.float32),
    }


def networkx_graph(G, seed, f=3) -> Graph:
    """A gnncore :class:`Graph` with ``G``'s edges and ``[n, f]`` standard-normal
    features (no labels, no weights)."""
    g = from_networkx(G, feature_attrs=None, label_attr=None, weight_attr=None)
    x = np.random.default_rng(seed).normal(size=(g.num_nodes, f)).astype(np.float32)
    return Graph.from_arrays(g.edge_index, x, num_nodes=g.num_nodes)


# ------------------------------------------------------------------------- drawings
def drawing(n, edges):
    """A drawing of nodes ``"0" .. "n-1"`` (label 0, no positions) with ``edges``
    sorted."""
    from explorer.drawing import Drawing

    return Drawing(names=tuple(str(i) for i in range(n)), labels=(0,) * n,
                   positions=(None,) * n, edges=tuple(sorted(edges)))


def random_drawing(n, m, seed=0):
    """A drawing of networkx's G(n, m) random graph (edges in networkx's order);
    node names ``"0" .. "n-1"``, label 0, no positions."""
    import networkx as nx

    from explorer.drawing import Drawing

    rng = np.random.default_rng(seed)
    G = nx.gnm_random_graph(n, m, seed=int(rng.integers(2**31)))
    return Drawing(names=tuple(str(i) for i in range(n)), labels=(0,) * n,
                   positions=(None,) * n, edges=tuple(G.edges()))


# ------------------------------------------------------------------------ parameters
def randomise(module, seed):
    """Random biases and BatchNorm affine / running statistics (they start at
    0 / 1), so that every parameter actually influences the output. Walks
    ``nnx.iter_graph`` and draws for each ``Param`` / ``BatchStat`` named
    ``bias`` or ``mean`` N(0, 0.5^2), ``scale`` U(0.5, 1.5), ``var`` U(0.5, 2)."""
    rng = np.random.default_rng(seed)
    draw = {"bias": lambda shape: rng.normal(scale=0.5, size=shape),
            "mean": lambda shape: rng.normal(scale=0.5, size=shape),
            "scale": lambda shape: rng.uniform(0.5, 1.5, shape),
            "var": lambda shape: rng.uniform(0.5, 2.0, shape)}
    for path, var in nnx.iter_graph(module):
        if isinstance(var, (nnx.Param, nnx.BatchStat)) and path and path[-1] in draw:
            var[...] = jnp.asarray(draw[path[-1]](var[...].shape), var[...].dtype)
    return module


def randomise_bias(module, seed):
    """Only the ``Param``s named ``bias``, from N(0, 0.5^2) (float32)."""
    rng = np.random.default_rng(seed)
    for path, var in nnx.iter_graph(module):
        if isinstance(var, nnx.Param) and path and path[-1] == "bias":
            var[...] = jnp.asarray(rng.normal(scale=0.5, size=var[...].shape), jnp.float32)
    return module


def randomise_affine(module, seed):
    """Every ``Param`` (whatever its name) from U(0.5, 1.5) (float32): non-trivial
    affine parameters of a norm layer, so that every parameter is tested."""
    rng = np.random.default_rng(seed)
    for _, var in nnx.iter_graph(module):
        if isinstance(var, nnx.Param):
            var[...] = jnp.asarray(rng.uniform(0.5, 1.5, var[...].shape), jnp.float32)
    return module


def fill_params(module, seed: int, scale: float = 0.5) -> None:
    """Set every ``nnx.Param`` of ``module`` to N(0, scale^2) noise (biases
    included, so that a bias that is dropped or misplaced shows up). Works on a
    module built with ``nnx.eval_shape`` (its parameters still abstract)."""
    rng = np.random.default_rng(seed)
    state = nnx.state(module, nnx.Param)
    nnx.update(module, jax.tree.map(
        lambda s: jnp.asarray(rng.normal(scale=scale, size=s.shape), s.dtype), state))


def with_edge(graph, s, t):
    """``graph`` (a :class:`gnncore.Graph` with features, labels and splits)
    with the undirected edge ``s``-``t`` added (both directions; weight 1)."""
    ei = np.concatenate([np.asarray(graph.edge_index), [[s, t], [t, s]]], axis=1)
    weights = None if graph.edge_weight is None else np.concatenate(
        [np.asarray(graph.edge_weight), [1.0, 1.0]])
    return Graph.from_arrays(ei, np.asarray(graph.x), y=np.asarray(graph.y),
                             edge_weight=weights, train_mask=np.asarray(graph.train_mask),
                             val_mask=np.asarray(graph.val_mask),
                             test_mask=np.asarray(graph.test_mask))
