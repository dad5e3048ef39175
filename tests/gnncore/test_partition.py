"""One graph over several devices (gnncore/partition.py): aggregation, GCN and
SAGE layers and ten training steps on 1, 2 and 4 forced CPU devices equal one
device's, for both exchanges, on a graph whose node count does not divide by
the parts and whose parts have very different edge counts; the placed arrays
are split by part; misuse raises a ValueError naming the argument.

The devices exist only if ``XLA_FLAGS`` is set before JAX starts, so the
multi-device work runs in one child process (a module fixture) that prints its
measurements as JSON; the tests assert on its parts.
"""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO, xla_flags
from flax import nnx

from gnncore import GCN, GATConv, GCNConv, Graph, GraphSAGE
from gnncore.partition import (
    aggregate,
    forward,
    make_mesh,
    partition_graph,
    shard_graph,
)

PARTS = (1, 2, 4)
EXCHANGES = ("all_gather", "halo")

CHILD = r"""
import json
import jax, jax.numpy as jnp, numpy as np, optax
from flax import nnx
from gnncore import GCN, GCNConv, Graph, GraphSAGE, MessagePassing, SAGEConv
from gnncore.partition import (aggregate, forward, make_mesh, partition_graph, shard_graph,
                               train_step)

# 53 nodes (not divisible by 2 or 4), 5 features, 3 classes. Most edges go into
# the first 13 nodes, so with 4 parts part 0 has ~20x the edges of the others;
# sources are uniform (remote rows for the halo), plus self-loops and duplicates.
rng = np.random.default_rng(0)
N, F, C = 53, 5, 3
dst = np.concatenate([rng.integers(0, 13, 300), rng.integers(0, N, 60), [4, 30, 30]])
src = np.concatenate([rng.integers(0, N, 360), [4, 30, 30]])
ei = np.concatenate([np.stack([src, dst]), np.stack([src[:5], dst[:5]])], axis=1)
g = Graph.from_arrays(ei, rng.normal(size=(N, F)), y=rng.integers(0, C, N),
                      edge_weight=rng.uniform(0.5, 2.0, ei.shape[1]),
                      train_mask=rng.random(N) < 0.7)
x, edges, w = g.x, g.edge_index, g.edge_weight

def layers():  # GCN, SAGE (no shrink: 5 -> 8), SAGE (shrinks first: 5 -> 2)
    return (GCNConv(F, 4, rngs=nnx.Rngs(1)), SAGEConv(F, 8, rngs=nnx.Rngs(2)),
            SAGEConv(F, 2, aggr="mean", rngs=nnx.Rngs(3)))

def models():
    ms = {"gcn": GCN(F, 6, C, num_layers=2, dropout=0.0, rngs=nnx.Rngs(0)),
          "sage": GraphSAGE(F, 6, C, num_layers=2, dropout=0.0, rngs=nnx.Rngs(0))}
    return ms, {k: nnx.Optimizer(m, optax.adam(0.01), wrt=nnx.Param) for k, m in ms.items()}

class Neighbours(MessagePassing):
    pass

# One compiled program per setting (compiles dominate this file's time): ten
# calls, each a training step of both models and the forward outputs.
@nnx.jit
def one_device(ms, opts, layers):
    def loss_fn(m):
        ce = optax.softmax_cross_entropy_with_integer_labels(m(x, edges, w), g.y)
        return jnp.sum(jnp.where(g.train_mask, ce, 0.0)) / jnp.sum(g.train_mask)
    losses = {}
    for k in ms:
        losses[k], grads = nnx.value_and_grad(loss_fn)(ms[k])
        opts[k].update(ms[k], grads)
    gcn, sage, sage_small = layers
    return losses, {"sum": Neighbours(aggr="sum").propagate(edges, x),
                    "mean": Neighbours(aggr="mean").propagate(edges, x),
                    "gcn": gcn(x, edges, w), "sage": sage(x, edges),
                    "sage_small": sage_small(x, edges)}

def train(step, *args):
    ms, opts = models()
    runs = [step(ms, opts, layers(), *args) for _ in range(10)]
    return {k: [float(r[0][k]) for r in runs] for k in ms}, runs[0][1]

out = {"diff": {}, "losses": {}, "parts": {}}
out["reference_losses"], reference = train(one_device)
for parts in (1, 2, 4):
    mesh = make_mesh(parts)
    for exchange in ("all_gather", "halo"):
        key = f"{parts}/{exchange}"
        host = partition_graph(g, parts, exchange=exchange)
        pg = shard_graph(host, mesh)

        @nnx.jit
        def step(ms, opts, layers, pg):
            losses = {k: train_step(ms[k], opts[k], pg, mesh=mesh) for k in ms}
            gcn, sage, sage_small = layers
            return losses, {"sum": aggregate(pg, mesh=mesh, aggr="sum"),
                            "mean": aggregate(pg, mesh=mesh, aggr="mean"),
                            "gcn": forward(gcn, pg, mesh=mesh),
                            "sage": forward(sage, pg, mesh=mesh),
                            "sage_small": forward(sage_small, pg, mesh=mesh)}

        out["losses"][key], got = train(step, pg)
        out["diff"][key] = {k: float(np.abs(host.unpad_nodes(v) - np.asarray(reference[k])).max())
                            for k, v in got.items()}
        dpart = np.asarray(g.edge_index)[1] // host.block
        info = {"rows_per_part": host.rows_per_part, "padded_nodes": host.padded_nodes,
                "real_nodes": int(np.asarray(pg.node_mask).sum()),
                "edges_per_part": host.edges_per_part, "halo_size": host.halo_size,
                "real_edges": np.bincount(dpart, minlength=parts).tolist()}
        if parts == 4:
            arrays = {"x": pg.x, "y": pg.y, "node_mask": pg.node_mask,
                      "edge_index": pg.adj.edge_index, "gcn_weight": pg.gcn_weight,
                      "output": got["gcn"]}
            if pg.send_index is not None:
                arrays["send_index"] = pg.send_index
            info["shards"] = {k: {"shape": list(a.shape),
                                  "shard_shapes": [list(s.data.shape)
                                                   for s in a.addressable_shards],
                                  "devices": sorted(d.id for d in a.sharding.device_set)}
                              for k, a in arrays.items()}
        out["parts"][key] = info
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def child():
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": xla_flags("--xla_force_host_platform_device_count=4")}
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("parts", PARTS)
@pytest.mark.parametrize("exchange", EXCHANGES)
def test_aggregation_and_layers_equal_one_device(child, parts, exchange):
    diff = child["diff"][f"{parts}/{exchange}"]
    assert set(diff) == {"sum", "mean", "gcn", "sage", "sage_small"}
    assert max(diff.values()) < 1e-5, diff


@pytest.mark.parametrize("parts", PARTS)
@pytest.mark.parametrize("exchange", EXCHANGES)
def test_ten_training_steps_lose_what_one_device_loses(child, parts, exchange):
    losses = child["losses"][f"{parts}/{exchange}"]
    for kind, ref in child["reference_losses"].items():
        np.testing.assert_allclose(losses[kind], ref, atol=1e-5, err_msg=kind)
        assert losses[kind][-1] < losses[kind][0], kind  # it trains
    one = child["losses"][f"1/{exchange}"]
    for kind in losses:
        np.testing.assert_allclose(losses[kind], one[kind], atol=1e-5)


def test_node_count_not_divisible_is_padded_and_skewed_parts_work(child):
    for parts in (2, 4):
        info = child["parts"][f"{parts}/halo"]
        assert 53 % parts
        assert info["rows_per_part"] == -(-53 // parts) + 1  # real slots + the sink
        assert info["padded_nodes"] == parts * info["rows_per_part"]
        assert info["real_nodes"] == 53
        assert info["edges_per_part"] == max(info["real_edges"])
    edges = child["parts"]["4/all_gather"]["real_edges"]
    assert max(edges) >= 10 * min(edges), edges  # very different edge counts
    assert 0 < child["parts"]["4/halo"]["halo_size"] < child["parts"]["4/halo"]["rows_per_part"]


@pytest.mark.parametrize("exchange", EXCHANGES)
def test_placed_arrays_are_split_by_part(child, exchange):
    shards = child["parts"][f"4/{exchange}"]["shards"]
    assert ("send_index" in shards) == (exchange == "halo")
    for name, a in shards.items():
        assert a["devices"] == [0, 1, 2, 3], name
        assert len(a["shard_shapes"]) == 4, name
        for shape in a["shard_shapes"]:
            # each device: 1/4 of the rows (node arrays) or its own part (per-part arrays)
            assert shape == [a["shape"][0] // 4] + a["shape"][1:], (name, a)
    assert shards["x"]["shard_shapes"][0][0] == child["parts"][f"4/{exchange}"]["rows_per_part"]


# ----------------------------------------------------------- in this process (one device)
def small_graph(n=9):
    ei = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8, 8], [1, 2, 3, 4, 5, 6, 7, 8, 0, 4]])
    return Graph.from_arrays(ei, np.eye(n, 3, dtype=np.float32), y=np.arange(n) % 2)


def test_host_layout_round_trips_and_static_sizes_are_checked():
    g = small_graph()
    pg = partition_graph(g, 2, exchange="halo")
    assert pg.rows_per_part == 6 and pg.padded_nodes == 12
    x = np.asarray(g.x)
    assert np.array_equal(pg.unpad_nodes(pg.pad_nodes(x)), x)
    assert np.array_equal(pg.unpad_nodes(pg.x), x)
    assert not np.asarray(pg.x)[[5, 11]].any()  # the sinks
    big = partition_graph(g, 2, exchange="halo", edges_per_part=16, halo_size=4)
    assert big.edges_per_part == 16 and big.halo_size == 4
    assert big.gcn_adj.edge_index.shape == (2, 2, 16 + 5)
    with pytest.raises(ValueError, match="edges_per_part"):
        partition_graph(g, 2, edges_per_part=2)
    with pytest.raises(ValueError, match="halo_size"):
        partition_graph(g, 2, halo_size=0)
    with pytest.raises(ValueError, match="halo_size"):
        partition_graph(g, 2, exchange="all_gather", halo_size=3)
    with pytest.raises(ValueError, match="exchange"):
        partition_graph(g, 2, exchange="ring")
    with pytest.raises(ValueError, match="rows"):
        pg.pad_nodes(x[:3])


def test_partition_graph_refuses_traced_input():
    g = small_graph()

    @jax.jit
    def inside(x):
        return partition_graph(g.replace(x=x), 2).x

    with pytest.raises(ValueError, match="graph.x is traced"):
        inside(g.x)

    def sized(parts, edges):
        return partition_graph(g, parts, edges_per_part=edges).x

    with pytest.raises(ValueError, match="num_parts must be a static"):
        jax.jit(sized)(2, 16)
    with pytest.raises(ValueError, match="edges_per_part must be a static"):
        jax.jit(sized, static_argnums=0)(2, 16)


def test_misuse_raises_value_errors_naming_the_argument():
    g = small_graph()
    pg = partition_graph(g, 1)
    mesh = make_mesh(1)
    rngs = nnx.Rngs(0)
    with pytest.raises(ValueError, match="devices"):
        make_mesh(len(jax.devices()) + 1)
    with pytest.raises(ValueError, match="num_parts=2"):
        forward(GCNConv(3, 2, rngs=rngs), partition_graph(g, 2), mesh=mesh)
    with pytest.raises(ValueError, match="num_parts=2"):
        shard_graph(partition_graph(g, 2), mesh)
    with pytest.raises(ValueError, match="axis='nodes'"):
        aggregate(pg, mesh=mesh, axis="nodes")
    with pytest.raises(ValueError, match="improved"):
        forward(GCNConv(3, 2, improved=True, rngs=rngs), pg, mesh=mesh)
    with pytest.raises(ValueError, match="gcn=True"):
        forward(GCNConv(3, 2, rngs=rngs), partition_graph(g, 1, gcn=False), mesh=mesh)
    with pytest.raises(ValueError, match="model: GATConv"):
        forward(GATConv(3, 2, rngs=rngs), pg, mesh=mesh)
    with pytest.raises(ValueError, match="norm='batch'"):
        forward(GCN(3, 4, 2, norm="batch", dropout=0.0, rngs=rngs), pg, mesh=mesh)
    with pytest.raises(ValueError, match="dropout"):
        forward(GraphSAGE(3, 4, 2, dropout=0.5, rngs=rngs), pg, mesh=mesh)
    with pytest.raises(ValueError, match="pad_nodes"):
        aggregate(pg, jnp.ones((9, 3)), mesh=mesh)
