"""Lesson 18: data parallel with ``shard_map`` but no gradient average: each
replica trains on its own shard, and the replicas drift apart without an error.

The replicas run the same per-device function as ``jax.shard_map`` over a
``data`` mesh axis when the machine has the devices; on one device the very
same function runs under ``jax.vmap(axis_name="data")`` (named-axis
collectives such as ``pmean`` work there too), and the card says which.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import PartitionSpec as P

from explorer.lessons.base import Lesson, Outcome
from explorer.sources import load_graph_dataset
from gnncore import GNN, ConvSpec, parallel

REPLICAS = 2
GRAPHS = 16  # 8 per replica, all real: pmean of the local means is the global mean
STEPS = 10
LEARNING_RATE = 0.3


def _data():
    """The graphs dealt to the replicas (``[REPLICAS, ...]`` arrays) and a model.
    Each replica's shard holds one class (as a dataset sorted by label and cut
    in two would), which makes the drift plain to see."""
    graphs, labels = load_graph_dataset("triangle", features="degree_one_hot", seed=0)
    by_class = [[i for i, y in enumerate(labels) if y == c][:GRAPHS // REPLICAS]
                for c in range(REPLICAS)]
    order = [i for group in zip(*by_class) for i in group]  # dealt round-robin below
    batch = parallel.shard_graphs([graphs[i] for i in order], [labels[i] for i in order],
                                  REPLICAS, balance=False)
    model = GNN(graphs[0].num_features, [ConvSpec("gcn", 16), ConvSpec("gcn", 16)],
                out_features=int(max(labels)) + 1, head=True, pool="mean",
                rngs=nnx.Rngs(0))
    return batch, model


def _replicas(step):
    """``step(params, batch)`` once per replica, along the ``data`` axis: as
    ``jax.shard_map`` over that many devices, or ``jax.vmap`` on one device."""
    if jax.device_count() >= REPLICAS:
        mesh = parallel.data_mesh(REPLICAS)

        def block(params, batch):  # each device holds a block of one replica
            one = jax.tree.map(lambda a: a[0], (params, batch))
            return jax.tree.map(lambda a: a[None], step(*one))

        # check_vma=False: gnncore's sparse kernel drops the "varies over data" type
        return jax.jit(jax.shard_map(block, mesh=mesh, in_specs=P("data"),
                                     out_specs=P("data"), check_vma=False)), \
            f"jax.shard_map over {REPLICAS} devices"
    return jax.jit(jax.vmap(step, axis_name="data")), (
        f"jax.vmap(axis_name='data') over {REPLICAS} replicas: this machine has one "
        "device (with XLA_FLAGS=--xla_force_host_platform_device_count=2 it is "
        "jax.shard_map over 2)")


def _train(average: bool) -> tuple[list[dict], float, str, tuple[float, ...], list[float]]:
    batch, model = _data()
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss_fn(params, b):
        logits = nnx.merge(graphdef, params, rest)(b.x, b.edge_index, batch=b.batch,
                                             num_graphs=b.num_graphs, node_mask=b.node_mask)
        picked = jnp.take_along_axis(jax.nn.log_softmax(logits),
                                     jnp.maximum(b.y, 0)[:, None], axis=1)[:, 0]
        real = b.graph_mask.astype(jnp.float32)
        return -jnp.sum(picked * real) / jnp.maximum(jnp.sum(real), 1.0)

    def step(params, b):  # one replica: its own copy of the parameters, its own shard
        loss, grads = jax.value_and_grad(loss_fn)(params, b)
        if average:
            grads = jax.lax.pmean(grads, "data")  # the fix: every replica, one gradient
        return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads), loss

    run, how = _replicas(step)
    params = jax.tree.map(lambda a: jnp.stack([a] * REPLICAS), params)  # equal copies
    rows, losses = [], []
    for i in range(STEPS):
        params, loss = run(params, batch)
        leaves = [np.asarray(a, np.float64).reshape(REPLICAS, -1)
                  for a in jax.tree.leaves(params)]
        norms = np.sqrt(sum((a ** 2).sum(axis=1) for a in leaves))
        spread = max(float(np.abs(a - a[:1]).max()) for a in leaves)
        losses.append(float(np.mean(np.asarray(loss))))
        rows.append({"step": i + 1,
                     **{f"replica {r} norm": round(float(norms[r]), 6) for r in range(REPLICAS)},
                     "max |replica 0 - replica 1|": float(f"{spread:.3g}")})
    # each replica's model on the other replica's shard (no collective: plain jit)
    swapped = jax.tree.map(lambda a: a[::-1], batch)
    cross = jax.jit(jax.vmap(loss_fn))(params, swapped)
    return rows, spread, how, tuple(losses), [float(c) for c in np.asarray(cross)]


PITFALL_CODE = """\
@jax.shard_map(mesh=mesh, in_specs=P("data"),
               out_specs=P("data"))
def step(params, batch):  # once per device
    grads = jax.grad(loss_fn)(params, batch)
    # no average: each replica follows
    # the gradient of its own shard
    return params - lr * grads"""

FIX_CODE = """\
@jax.shard_map(mesh=mesh, in_specs=P("data"),
               out_specs=P("data"))
def step(params, batch):  # once per device
    grads = jax.grad(loss_fn)(params, batch)
    grads = jax.lax.pmean(grads, "data")
    return params - lr * grads"""


def _pitfall(lesson, run):
    rows, spread, how, losses, cross = _train(average=False)
    drift = spread > 1e-6
    first, last = rows[0], rows[-1]
    return Outcome(
        "shard_map without pmean", "REPLICAS DRIFT" if drift else "NO DRIFT", not drift,
        f"The {REPLICAS} replicas started equal; after {STEPS} steps their parameters differ "
        f"by up to {spread:.3g} (norms {last['replica 0 norm']:.4f} vs "
        f"{last['replica 1 norm']:.4f}, from {first['replica 0 norm']:.4f} vs "
        f"{first['replica 1 norm']:.4f} after step 1). Nothing raised, and the loss even "
        f"falls fast (to {losses[-1]:.3f}): each replica fits its own shard, and on the other "
        f"replica's shard replica 0's loss is {cross[0]:.3f}.",
        rows=tuple(rows), losses=losses,
        evidence=(f"replicas run by {how}",
                  f"on the other replica's shard: loss {cross[0]:.3f} (replica 0), "
                  f"{cross[1]:.3f} (replica 1); on their own: {losses[-1]:.3f} on average"),
        code=PITFALL_CODE)


def _fix(lesson, run):
    rows, spread, how, losses, cross = _train(average=True)
    synced = spread <= 1e-6
    last = rows[-1]
    return Outcome(
        "jax.lax.pmean of the gradients", "IN SYNC" if synced else "STILL DRIFTING", synced,
        f"With the gradients averaged over the 'data' axis every replica applies the same "
        f"update: after {STEPS} steps they differ by {spread:.3g} (norms "
        f"{last['replica 0 norm']:.4f} and {last['replica 1 norm']:.4f}). GSPMD (jax.jit "
        "with sharded inputs, as the explorer's Devices setting does) inserts this average "
        "itself.",
        rows=tuple(rows), losses=losses,
        evidence=(f"replicas run by {how}",
                  f"on the other replica's shard: loss {cross[0]:.3f} (replica 0), "
                  f"{cross[1]:.3f} (replica 1): one model, learning both classes slowly"),
        code=FIX_CODE)


LESSON = Lesson(
    title="Data parallel without averaging the gradients: the replicas drift apart",
    symptom="The replicas' parameter norms, step by step: they split apart, with no error.",
    explanation=("In data parallel training every device holds a copy of the model and a "
                 "shard of the batch. With `jax.shard_map` you write what one device does, so "
                 "you also write the communication: without `jax.lax.pmean` of the "
                 "gradients each device follows the gradient of its own shard, and the copies "
                 "stop being one model. Nothing fails; the loss even falls on every device. "
                 "GSPMD (`jax.jit` with sharded inputs) inserts the average for you."),
    fix_label="Apply the fix: pmean the gradients",
    pitfall=_pitfall,
    fix=_fix,
)
