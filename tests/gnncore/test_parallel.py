"""Data-parallel training (gnncore.parallel): dealing and padding graphs per
device, the GSPMD and shard_map steps against one device, replicas that drift
without the gradient all-reduce, and the errors that name their argument.

Several devices need ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
before JAX starts, so every 4-device check runs in ONE subprocess (this file,
run as a script, prints its results as JSON); the tests read their part of it.
The host-side checks run here, on this process's single CPU device.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import optax
import pytest
from flax import nnx
from graphs import networkx_graph

from gnncore import GNN, Batch, ConvSpec
from gnncore import parallel as par

REPO = Path(__file__).resolve().parents[2]
STEPS = 10
# 7 graphs of different sizes: not divisible by 2 or 4 devices
SHAPES = [nx.cycle_graph(5), nx.path_graph(3), nx.star_graph(4), nx.complete_graph(4),
          nx.cycle_graph(7), nx.path_graph(6), nx.wheel_graph(5)]
GRAPHS = [networkx_graph(G, seed) for seed, G in enumerate(SHAPES)]
LABELS = [0, 1, 1, 0, 0, 1, 0]


def _model():
    # no BatchNorm, no dropout: every device count computes the same function
    return GNN(3, [ConvSpec("gcn", 8), ConvSpec("sage", 8)], out_features=2, head=True,
               pool="mean", rngs=nnx.Rngs(0))


def _tx():
    return optax.adam(1e-2)


@nnx.jit
def _reference_step(model, optimizer, batch):
    def loss_fn(model):
        losses = par.graph_losses(model, batch)
        w = batch.graph_mask.astype(losses.dtype)
        return jnp.sum(losses * w) / jnp.sum(w)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def _reference(batch, steps):
    """One device, no gnncore.parallel: plain nnx training on one padded batch."""
    model = _model()
    optimizer = nnx.Optimizer(model, _tx(), wrt=nnx.Param)
    return [float(_reference_step(model, optimizer, batch)) for _ in range(steps)]


def _train(step, form, mesh, batch, steps):
    state = par.train_state(_model(), _tx(), mesh, per_device=form == "shard_map")
    losses = []
    for _ in range(steps):
        state, loss = step(state, batch)
        losses.append(float(loss))
    return losses, state


def _four_device_results() -> dict:
    """Everything the 4-device tests assert on (run in the subprocess). Each
    step is compiled once: the 3-graph runs reuse the 7-graph shapes."""
    whole = Batch.from_graphs(GRAPHS, LABELS)
    out = {"devices": jax.device_count(), "reference": _reference(whole, STEPS)}
    steps = {}
    for n in (1, 2, 4):
        mesh = par.data_mesh(n)
        batch = par.place(par.shard_graphs(GRAPHS, LABELS, n), mesh)
        for form in ("gspmd", "shard_map"):
            steps[form, n] = step = (par.shard_map_step(_tx(), mesh) if form == "shard_map"
                                     else par.gspmd_step(_tx(), mesh))
            losses, state = _train(step, form, mesh, batch, STEPS)
            out[f"{form}/{n}"] = {"losses": losses, "spread": par.replica_spread(state),
                                  "norms": par.replica_param_norms(state).tolist()}
        x = batch.x
        out[f"sharding/{n}"] = {
            "spec": list(x.sharding.spec), "global": list(x.shape),
            "shards": sorted([int(s.device.id), list(s.data.shape)]
                             for s in x.addressable_shards),
            "real_graphs": np.asarray(batch.graph_mask).sum(axis=1).tolist()}
    # averaging switched off: the replicas drift apart, silently
    step = par.shard_map_step(_tx(), mesh, average_grads=False)
    losses, state = _train(step, "shard_map", mesh, batch, 5)
    out["drift"] = {"losses": losses, "spread": par.replica_spread(state),
                    "norms": par.replica_param_norms(state).tolist()}
    # 3 graphs on 4 devices: one device holds padding only
    sizes = {"num_nodes": batch.x.shape[1], "num_edges": batch.edge_index.shape[2],
             "num_graphs": batch.num_graphs}
    few = par.place(par.shard_graphs(GRAPHS[:3], LABELS[:3], 4, **sizes), mesh)
    out["empty/real_graphs"] = np.asarray(few.graph_mask).sum(axis=1).tolist()
    out["empty/gspmd"] = _train(steps["gspmd", 4], "gspmd", mesh, few, 3)[0]
    out["empty/reference"] = _reference(
        Batch.from_graphs(GRAPHS[:3], LABELS[:3], num_nodes=whole.num_nodes,
                          num_edges=whole.num_edges, num_graphs=whole.num_graphs), 3)
    errors = {}
    try:
        par.data_mesh(5)
    except ValueError as err:
        errors["data_mesh"] = str(err)
    try:
        par.place(np.zeros((3, 2)), mesh)
    except ValueError as err:
        errors["place"] = str(err)
    out["errors"] = errors
    return out


@pytest.fixture(scope="module", autouse=True)
def _four_devices_process():
    """Starts the 4-device run with the module's first test, so that it works
    while the 1-device tests run here."""
    from conftest import xla_flags  # here: this file also runs as the subprocess's script

    env = dict(os.environ, XLA_FLAGS=xla_flags("--xla_force_host_platform_device_count=4"),
               PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]))
    proc = subprocess.Popen([sys.executable, __file__], env=env, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.fixture(scope="module")
def four(_four_devices_process):
    proc = _four_devices_process
    try:
        stdout, stderr = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        pytest.fail(f"the 4-device run took over 300 s: {stderr[-4000:]}")
    assert proc.returncode == 0, stderr[-4000:]
    return json.loads(stdout.strip().splitlines()[-1])


# ----------------------------------- here, on 1 device (while the 4 devices run)
def test_too_many_devices_names_the_flag():
    with pytest.raises(ValueError, match="num_devices=2 .*xla_force_host_platform_device_"
                                         "count=2"):
        par.data_mesh(2)
    with pytest.raises(ValueError, match="num_devices must be at least 1"):
        par.data_mesh(0)
    assert par.data_mesh().shape == {"data": 1}


def test_deal_balances_sizes_and_counts():
    parts = par.deal(GRAPHS, 4)
    assert sorted(i for p in parts for i in p) == list(range(7))
    assert sorted(len(p) for p in parts) == [1, 2, 2, 2]
    assert all(p == sorted(p) for p in parts)
    load = [sum(GRAPHS[i].num_nodes + GRAPHS[i].num_edges for i in p) for p in parts]
    rr = par.deal(GRAPHS, 4, balance=False)
    assert rr == [[0, 4], [1, 5], [2, 6], [3]]
    rr_load = [sum(GRAPHS[i].num_nodes + GRAPHS[i].num_edges for i in p) for p in rr]
    assert max(load) <= max(rr_load)
    assert par.deal(GRAPHS[:2], 4) == [[0], [1], [], []]  # fewer graphs than devices


def test_shard_graphs_stacks_padded_per_device_batches():
    b = par.shard_graphs(GRAPHS, LABELS, 4, balance=False)
    parts = par.deal(GRAPHS, 4, balance=False)
    assert b.num_graphs == 4  # ceil(7 / 4) = 2 graphs + the padding graph, bucketed
    assert b.x.shape[0] == b.graph_mask.shape[0] == b.y.shape[0] == 4
    for d, part in enumerate(parts):
        one = Batch.from_graphs([GRAPHS[i] for i in part], [LABELS[i] for i in part],
                                num_nodes=b.x.shape[1], num_edges=b.edge_index.shape[2],
                                num_graphs=b.num_graphs)
        for mine, theirs in zip(jax.tree.leaves(b), jax.tree.leaves(one)):
            np.testing.assert_array_equal(mine[d], theirs)
    assert list(b.y[3]) == [LABELS[3], -1, -1, -1]
    assert list(b.graph_mask[3]) == [True, False, False, False]


def test_a_device_without_graphs_gets_padding_only():
    b = par.shard_graphs(GRAPHS[:2], LABELS[:2], 3, num_nodes=16, num_edges=32)
    empty = [d for d in range(3) if not b.graph_mask[d].any()]
    assert len(empty) == 1
    (d,) = empty
    assert not b.node_mask[d].any() and not b.edge_mask[d].any()
    assert (b.y[d] == -1).all() and (b.batch[d] == 0).all() and not b.x[d].any()
    assert (b.edge_index[d] == 15).all()  # padding edges: loops on the last node


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="num_nodes=8 is too small: device"):
        par.shard_graphs(GRAPHS, LABELS, 2, num_nodes=8)
    with pytest.raises(ValueError, match="num_graphs=4 is too small"):
        par.shard_graphs(GRAPHS, LABELS, 2, num_graphs=4)
    with pytest.raises(ValueError, match="y: 2 labels for 7 graphs"):
        par.shard_graphs(GRAPHS, [0, 1], 2)
    with pytest.raises(ValueError, match="num_devices must be a Python int"):
        par.shard_graphs(GRAPHS, LABELS, 2.0)
    with pytest.raises(ValueError, match="y must be host labels"):
        jax.jit(lambda y: par.shard_graphs(GRAPHS, y, 2))(jnp.array(LABELS))
    with pytest.raises(ValueError, match="graphs: need at least one graph"):
        par.shard_graphs([], None, 2)


def test_steps_refuse_the_wrong_state_or_batch():
    mesh = par.data_mesh(1)
    batch = par.place(par.shard_graphs(GRAPHS, LABELS, 1), mesh)
    one = par.train_state(_model(), _tx(), mesh)
    stacked = par.train_state(_model(), nnx.Optimizer(_model(), _tx(), wrt=nnx.Param), mesh,
                              per_device=True)
    assert one.replicas == 0 and stacked.replicas == 1
    with pytest.raises(ValueError, match="per_device=False"):
        par.gspmd_step(_tx(), mesh)(stacked, batch)
    with pytest.raises(ValueError, match="per_device=True"):
        par.shard_map_step(_tx(), mesh)(one, batch)
    with pytest.raises(ValueError, match="leading device axis of 1"):
        par.gspmd_step(_tx(), mesh)(one, Batch.from_graphs(GRAPHS, LABELS))
    with pytest.raises(ValueError, match="graph_losses needs graph labels"):
        par.gspmd_step(_tx(), mesh)(one, par.place(par.shard_graphs(GRAPHS, None, 1), mesh))
    with pytest.raises(ValueError, match="tx must be a gradient transformation"):
        par.train_state(_model(), "adam", mesh)
    assert par.replica_spread(one) == 0.0 and par.replica_param_norms(one).shape == (1,)
    back = stacked.model(0)
    assert isinstance(back, GNN)


def test_batchnorm_and_dropout_state_is_carried():
    """Both steps update a model's non-parameter state (BatchNorm statistics, RNG
    counts) under jax.grad, and compute the same per-device function."""
    mesh = par.data_mesh(1)
    batch = par.place(par.shard_graphs(GRAPHS, LABELS, 1), mesh)
    losses, rests = {}, {}
    for form in ("gspmd", "shard_map"):
        model = GNN(3, [ConvSpec("gcn", 8)], out_features=2, head=True, pool="mean",
                    norm="batch", dropout=0.5, rngs=nnx.Rngs(0))
        # SGD, not Adam: the conv bias before BatchNorm gets a zero gradient up to
        # rounding, which Adam would blow up into different running means
        tx = optax.sgd(0.1)
        state = par.train_state(model, tx, mesh, per_device=form == "shard_map")
        step = (par.shard_map_step(tx, mesh) if form == "shard_map"
                else par.gspmd_step(tx, mesh))
        for _ in range(2):
            state, loss = step(state, batch)
        losses[form], rests[form] = float(loss), state.model().norms[0].mean[...]
        assert int(np.asarray(state.model().dropout.rngs.count[...])) == 2  # 2 steps
    assert np.isfinite(losses["gspmd"])
    assert losses["gspmd"] == pytest.approx(losses["shard_map"], abs=1e-5)
    assert np.abs(rests["gspmd"]).max() > 0
    np.testing.assert_allclose(rests["gspmd"], rests["shard_map"], atol=1e-6)


# ------------------------------------------------------------- 4 devices
def test_four_devices_are_there(four):
    assert four["devices"] == 4


@pytest.mark.parametrize("form", ["gspmd", "shard_map"])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_losses_match_one_device(four, form, n):
    """7 graphs (padded on 2 and 4 devices): ten steps, the same losses."""
    ref = four["reference"]
    assert ref[-1] < ref[0]  # it trains
    np.testing.assert_allclose(four[f"{form}/{n}"]["losses"], ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_averaged_replicas_stay_identical(four, n):
    result = four[f"shard_map/{n}"]
    assert len(result["norms"]) == n
    assert result["spread"] <= 1e-6
    assert np.ptp(result["norms"]) <= 1e-5


def test_without_averaging_the_replicas_drift_apart(four):
    drift = four["drift"]
    assert drift["spread"] > 1e-3
    norms = np.array(drift["norms"])
    assert len(norms) == 4 and np.ptp(norms) > 1e-4
    assert len(set(np.round(norms, 6))) == 4  # every replica has its own parameters
    assert all(np.isfinite(drift["losses"]))  # and nothing complains


def test_uneven_counts_are_padded_not_refused(four):
    assert sorted(four["sharding/4"]["real_graphs"]) == [1, 2, 2, 2]
    assert sorted(four["sharding/2"]["real_graphs"]) == [3, 4]
    # 3 graphs on 4 devices: a device of padding only, still the same losses
    assert sorted(four["empty/real_graphs"]) == [0, 1, 1, 1]
    np.testing.assert_allclose(four["empty/gspmd"], four["empty/reference"], atol=1e-5)


@pytest.mark.parametrize("n", [2, 4])
def test_placed_batch_is_split_over_the_devices(four, n):
    placed = four[f"sharding/{n}"]
    assert placed["spec"] == ["data"]
    rows, per_device = placed["global"][0], placed["global"][1:]
    assert rows == n
    # every device holds its own 1/N of the batch, one row
    assert placed["shards"] == [[d, [1] + per_device] for d in range(n)]


def test_errors_on_four_devices(four):
    assert "num_devices=5" in four["errors"]["data_mesh"]
    assert "4 cpu device(s)" in four["errors"]["data_mesh"]
    assert "divides by the 4 devices" in four["errors"]["place"]


if __name__ == "__main__":
    print(json.dumps(_four_device_results()))
