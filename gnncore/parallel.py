"""Data-parallel training over graph batches, on JAX's own sharding machinery.

The idea: cut a dataset's graphs into ``N`` groups, one per device, pad every
group to one shape, and stack them into a :class:`~gnncore.batch.Batch` whose
arrays all have a leading device axis ``[N, ...]``. That axis is placed on a
1-D :class:`jax.sharding.Mesh` with ``NamedSharding(mesh, P("data"))``, so
device ``d`` holds group ``d`` and nothing else. Every device runs the same
model on its own group; only the gradients travel.

Two ways to write the step, both here and both exact:

- :func:`gspmd_step` (GSPMD): one ``jax.jit`` program over the whole stacked
  batch, the model ``jax.vmap``-ed over the device axis, the parameters
  replicated. The compiler sees that the device axis is sharded, keeps each
  group's work on its device and inserts the all-reduce of the gradients.
- :func:`shard_map_step` (``jax.shard_map``): the per-device program is
  written out. Each device differentiates the loss *sum* of its own group and
  the sums and real-graph counts are added up with ``jax.lax.psum``; every
  device holds its own copy of the parameters and optimizer state (a stacked
  :class:`TrainState` with a leading device axis) and applies the same update.
  ``average_grads=False`` leaves the ``psum`` out: each replica then follows its
  own group and the replicas drift apart without any error —
  :func:`replica_spread` and :func:`replica_param_norms` make that visible.

Pitfalls:

- **The loss must be the mean over all real graphs of all devices.** Devices
  hold different numbers of real graphs (7 graphs on 4 devices: 2, 2, 2, 1) and
  the padding slots must not count. The mean of per-device means
  (``jax.lax.pmean`` of local means) weights a device's graphs by
  ``1 / its count``, so its gradient is not the one-device gradient. Here each
  device contributes the *sum* of its per-graph losses and its count of real
  graphs, and the global mean is ``psum(sums) / psum(counts)``; with it the
  losses of 1, 2 and 4 devices agree to float rounding.
- **The graph count need not divide by the devices, the leading axis must.**
  A sharded axis is cut into ``N`` equal blocks, so every array needs
  ``N`` rows along it. :func:`shard_graphs` therefore pads: a device short of
  graphs gets padding slots (``graph_mask`` False, label -1), and a device with
  no graph at all (fewer graphs than devices) gets a batch of padding only.
  :func:`place` refuses a leading axis that does not divide by the devices.
- **BatchNorm sees one device's nodes.** The model runs per device, so
  ``BatchNorm`` normalises with the statistics of that device's group, not of
  the whole batch (the losses then depend on the number of devices). Its
  running averages differ per device: :func:`gspmd_step` averages them over
  the devices after each step; :func:`shard_map_step` keeps one set per
  replica. ``LayerNorm``/``GraphNorm`` work per graph and are unaffected.
- **Dropout draws a different mask per device**: the device index is folded
  into each RNG key (``jax.random.fold_in``), so the devices do not all drop
  the same rows; results with dropout therefore differ from one device.
- **Sizes are static.** The per-device node, edge and graph counts are fixed
  on the host by :func:`shard_graphs` (bucketed, or passed in); a compiled step
  is specialised to them and to the number of devices.

Several processes (``jax.distributed.initialize``, one per host) run the same
code: :func:`data_mesh` then spans every process's devices, :func:`place`
transfers only the rows of a process's own devices, and the step's loss comes
back replicated so that every process can print it
(``examples/distributed_train.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from gnncore.batch import Batch
from gnncore.graph import Graph, bucket_size

__all__ = ["TrainState", "data_mesh", "deal", "graph_losses", "gspmd_step", "place",
           "replica_param_norms", "replica_spread", "replicate", "shard_graphs",
           "shard_map_step", "train_state"]


# ------------------------------------------------------------------- mesh
def data_mesh(num_devices: int | None = None, axis: str = "data") -> Mesh:
    """A 1-D mesh of the first ``num_devices`` devices (of every process).

    Arguments:
        num_devices: how many devices; ``None`` for all of them.
        axis: the mesh axis name the batch is split along.

    Raises ``ValueError`` naming ``num_devices`` when there are fewer devices:
    on CPU, JAX shows one device unless
    ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` is set before JAX
    starts (a running process cannot add devices).
    """
    devices = jax.devices()
    if num_devices is None:
        n = len(devices)
    else:
        try:
            n = operator.index(num_devices)
        except TypeError as err:
            raise ValueError(f"num_devices must be a Python int or None; got "
                             f"{type(num_devices).__name__}") from err
        if n < 1:
            raise ValueError(f"num_devices must be at least 1; got {n}")
    if n > len(devices):
        platform = devices[0].platform
        hint = (f" On CPU, set XLA_FLAGS=--xla_force_host_platform_device_count={n} "
                "in the environment before JAX starts (before the first `import jax`); "
                "a running process cannot add devices.")
        raise ValueError(f"num_devices={n} but JAX sees {len(devices)} {platform} "
                         f"device(s).{hint}")
    return Mesh(np.array(devices[:n]), (axis,))


def _axis(mesh: Mesh) -> str:
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh: expected a 1-D data mesh (data_mesh); got axes "
                         f"{mesh.axis_names}")
    return mesh.axis_names[0]


# ---------------------------------------------------------------- batching
def _static_count(value, name: str) -> int:
    if isinstance(value, jax.core.Tracer):
        raise ValueError(f"{name} must be a static Python int, not a traced value: "
                         "batches are built on the host, outside jit")
    try:
        n = operator.index(value)
    except TypeError as err:
        raise ValueError(f"{name} must be a Python int; got {type(value).__name__}") from err
    if n < 1:
        raise ValueError(f"{name} must be at least 1; got {n}")
    return n


def deal(graphs: Sequence[Graph], num_devices: int, *, balance: bool = True
         ) -> list[list[int]]:
    """Which graphs go to which device: ``num_devices`` lists of graph indices.

    Every device gets ``floor(G / N)`` or ``ceil(G / N)`` graphs (``G`` graphs,
    ``N`` devices), so the static per-device graph count is as small as it
    can be; each list is in dataset order.

    Arguments:
        graphs: the graphs (only their sizes are read).
        num_devices: ``N``.
        balance: ``True`` deals the largest graphs first, each to the device
            with the least work so far (nodes + edges) that still has room:
            the devices' padded node and edge counts stay close. ``False``
            deals round-robin (graph ``i`` to device ``i % N``).
    """
    n = _static_count(num_devices, "num_devices")
    count = len(graphs)
    if not balance:
        return [list(range(d, count, n)) for d in range(n)]
    cap = math.ceil(count / n)
    sizes = np.array([g.num_nodes + g.num_edges for g in graphs], np.int64)
    load, parts = np.zeros(n, np.int64), [[] for _ in range(n)]
    for i in np.argsort(-sizes, kind="stable"):
        room = [d for d in range(n) if len(parts[d]) < cap]
        d = min(room, key=lambda k: (load[k], k))
        parts[d].append(int(i))
        load[d] += sizes[i]
    return [sorted(p) for p in parts]


def _padding_batch(like: Batch, num_nodes: int, num_edges: int, num_graphs: int) -> Batch:
    """A batch of padding only (no real graph), with the fields of ``like``."""
    g = like.graph
    last = num_nodes - 1
    features = g.x.shape[1]
    graph = Graph.from_arrays(
        np.full((2, num_edges), last, np.int64), np.zeros((num_nodes, features), np.float32),
        num_nodes=num_nodes,
        edge_weight=None if g.edge_weight is None else np.ones(num_edges, np.float32),
        edge_attr=(None if g.edge_attr is None else
                   np.zeros((num_edges, np.asarray(g.edge_attr).shape[1]), np.float32)),
        y=None if g.y is None else np.full(num_nodes, -1, np.int32))
    ptr = np.full(num_graphs + 1, num_nodes, np.int32)
    ptr[0] = 0
    return Batch(graph=graph, batch=np.zeros(num_nodes, np.int32),
                 node_mask=np.zeros(num_nodes, bool), edge_mask=np.zeros(num_edges, bool),
                 graph_mask=np.zeros(num_graphs, bool),
                 y=None if like.y is None else np.full(num_graphs, -1, np.int32),
                 ptr=ptr, num_graphs=num_graphs)


def shard_graphs(graphs: Sequence[Graph], y, num_devices: int, *,
                 num_nodes: int | None = None, num_edges: int | None = None,
                 num_graphs: int | None = None, balance: bool = True) -> Batch:
    """Deal ``graphs`` to ``num_devices`` devices: one :class:`Batch` whose every
    array has a leading device axis ``[N, ...]`` (host arrays; :func:`place`
    puts them on a mesh).

    Row ``d`` is device ``d``'s own padded batch (``Batch.from_graphs`` of the
    graphs :func:`deal` gives it); all rows have one shape, and ``num_graphs``
    is the static per-device graph count. When the graph count does not divide
    by ``N`` the missing slots are padding graphs (``graph_mask`` False, label
    -1); a device left without any graph gets a batch of padding only.

    Arguments:
        graphs: the graphs (one feature width; ``edge_weight`` / ``edge_attr``
            on all or none).
        y: one integer label per graph, or ``None`` (no labels).
        num_devices: ``N``, e.g. ``mesh.size``.
        num_nodes, num_edges, num_graphs: the per-device padded sizes; by
            default the buckets (``bucket_size``) of the fullest device (one
            padding node and one padding graph included). Fix them, e.g. to a
            dataset's largest bucket, so that every batch compiles to one step.
        balance: see :func:`deal`.

    Raises ``ValueError`` naming the argument when a size is too small for
    some device, or when an input is a traced value (this runs on the host).
    """
    graphs = list(graphs)
    n = _static_count(num_devices, "num_devices")
    if not graphs:
        raise ValueError("graphs: need at least one graph")
    if y is not None:
        if isinstance(y, jax.core.Tracer):
            raise ValueError("y must be host labels, not a traced value: shard_graphs "
                             "runs on the host, outside jit")
        y = np.asarray(y, np.int32).reshape(-1)
        if len(y) != len(graphs):
            raise ValueError(f"y: {len(y)} labels for {len(graphs)} graphs")
    parts = deal(graphs, n, balance=balance)
    nodes = [sum(graphs[i].num_nodes for i in p) for p in parts]
    edges = [sum(graphs[i].num_edges for i in p) for p in parts]
    counts = [len(p) for p in parts]
    need = {"num_nodes": max(nodes) + 1, "num_edges": max(edges),
            "num_graphs": max(counts) + 1}
    given = {"num_nodes": num_nodes, "num_edges": num_edges, "num_graphs": num_graphs}
    sizes = {}
    for name, value in given.items():
        if value is None:
            sizes[name] = (bucket_size(need[name], minimum=2) if name == "num_graphs"
                           else bucket_size(need[name]))
            continue
        value = 0 if name == "num_edges" and value == 0 else _static_count(value, name)
        if value < need[name]:
            busiest = int(np.argmax({"num_nodes": nodes, "num_edges": edges,
                                     "num_graphs": counts}[name]))
            why = "its real edges" if name == "num_edges" else "padding takes one slot"
            raise ValueError(f"{name}={value} is too small: device {busiest} of {n} "
                             f"needs at least {need[name]} ({why})")
        sizes[name] = value
    batches = [Batch.from_graphs([graphs[i] for i in p],
                                 None if y is None else y[p], **sizes) if p else None
               for p in parts]
    like = next(b for b in batches if b is not None)
    batches = [b if b is not None else _padding_batch(like, **sizes) for b in batches]
    return jax.tree.map(lambda *rows: np.stack([np.asarray(r) for r in rows]), *batches)


# --------------------------------------------------------------- placement
def _put(tree, mesh: Mesh, spec: P, what: str):
    sharding = NamedSharding(mesh, spec)
    rows = mesh.size

    def put(leaf):
        if spec != P() and (np.ndim(leaf) == 0 or np.shape(leaf)[0] % rows):
            raise ValueError(
                f"{what}: every array needs a leading device axis that divides by the "
                f"{rows} devices of the mesh; got shape {np.shape(leaf)} (build the batch "
                f"with shard_graphs(..., num_devices={rows}), which pads)")
        if isinstance(leaf, jax.Array) and (not leaf.is_fully_addressable or _is_key(leaf)):
            return jax.device_put(leaf, sharding)
        host = np.asarray(leaf)
        # each process builds only the shards of its own devices
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(put, tree)


def place(tree, mesh: Mesh):
    """Put a stacked tree (e.g. :func:`shard_graphs`' batch) on ``mesh``, its
    leading axis split over the devices: ``NamedSharding(mesh, P(axis))``.

    Arguments:
        tree: a pytree of arrays with a leading axis that divides by
            ``mesh.size`` (host arrays or JAX arrays).
        mesh: a 1-D mesh (:func:`data_mesh`).

    Device ``d`` then holds rows ``d * k : (d + 1) * k`` (one row each for a
    batch from :func:`shard_graphs`). With several processes, every process
    passes the same host arrays and transfers only its own devices' rows.
    """
    return _put(tree, mesh, P(_axis(mesh)), "tree")


def replicate(tree, mesh: Mesh):
    """Put a copy of ``tree`` on every device of ``mesh`` (``P()``).

    Arguments:
        tree: a pytree of arrays (the same values in every process).
        mesh: the mesh.
    """
    return _put(tree, mesh, P(), "tree")


# ------------------------------------------------------------- train state
@dataclasses.dataclass(frozen=True, eq=False)
class TrainState:
    """A model's arrays and optimizer state, placed on a mesh. A pytree.

    Arguments:
        params: the model's ``nnx.Param`` state.
        rest: the rest of its state (BatchNorm statistics, RNG keys and counts).
        opt_state: the optimizer's state for ``params``.
        graphdef: static: the model's structure (``nnx.split``).
        replicas: static: ``0`` for one copy replicated on every device (for
            :func:`gspmd_step`); ``N`` when every array has a leading device
            axis ``[N, ...]``, one copy per device (for :func:`shard_map_step`).

    Build it with :func:`train_state`; :meth:`model` gives the model back.
    """

    params: Any
    rest: Any
    opt_state: Any
    graphdef: Any = None
    replicas: int = 0

    def model(self, replica: int = 0) -> nnx.Module:
        """The model (of replica ``replica`` for a per-device state), readable
        in every process."""
        tree = (self.params, self.rest)
        if self.replicas:
            if not 0 <= replica < self.replicas:
                raise ValueError(f"replica={replica}: the state has {self.replicas}")
            tree = _gather(_take, tree, jnp.int32(replica))
        return nnx.merge(self.graphdef, *tree)


jax.tree_util.register_dataclass(TrainState, data_fields=["params", "rest", "opt_state"],
                                 meta_fields=["graphdef", "replicas"])


def _optax_like(tx):
    if isinstance(tx, nnx.Optimizer):
        tx = tx.tx
    if not (callable(getattr(tx, "init", None)) and callable(getattr(tx, "update", None))):
        raise ValueError("tx must be a gradient transformation with init and update (an "
                         f"optax transformation, or an nnx.Optimizer); got {type(tx).__name__}")
    return tx


def train_state(model: nnx.Module, tx, mesh: Mesh, *, per_device: bool = False
                ) -> TrainState:
    """Split ``model``, start the optimizer and place both on ``mesh``.

    Arguments:
        model: an NNX module (e.g. a graph-level ``gnncore.GNN``).
        tx: the optimizer: an optax gradient transformation (anything with
            ``init(params)`` and ``update(grads, state, params)``) or an
            ``nnx.Optimizer`` (its transformation is used; its state is not).
        mesh: a 1-D mesh (:func:`data_mesh`).
        per_device: ``False`` (for :func:`gspmd_step`): one copy, replicated.
            ``True`` (for :func:`shard_map_step`): ``N`` stacked copies, one
            per device, sharded ``P(axis)``.

    Every process must build the same model (same seed).
    """
    tx = _optax_like(tx)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    # one compiled init (eagerly, every zeros_like of every shape compiles)
    opt_state = jax.jit(tx.init)(params)
    tree = jax.tree.map(_to_host, (params, rest, opt_state))
    if not per_device:
        params, rest, opt_state = replicate(tree, mesh)
        return TrainState(params, rest, opt_state, graphdef, 0)
    n = mesh.size
    stacked = jax.tree.map(
        lambda a: (np.broadcast_to(a, (n,) + a.shape) if isinstance(a, np.ndarray)
                   else jnp.broadcast_to(a, (n,) + a.shape)), tree)
    params, rest, opt_state = place(stacked, mesh)
    return TrainState(params, rest, opt_state, graphdef, n)


def _is_key(a) -> bool:
    return jax.dtypes.issubdtype(getattr(a, "dtype", None), jax.dtypes.prng_key)


def _to_host(a):
    """A host copy (RNG keys stay JAX arrays: they have no NumPy form)."""
    return a if _is_key(a) else np.asarray(a)


# ------------------------------------------------------------------- steps
def graph_losses(model: nnx.Module, batch: Batch):
    """Cross-entropy of each graph slot of one (per-device) batch: ``[num_graphs]``.

    The default ``loss_fn`` of the steps; padding slots get a finite value,
    which the steps leave out. A custom ``loss_fn(model, batch)`` must also
    return one loss per graph slot.

    Arguments:
        model: a graph-level model (``pool=...``) called as
            ``model(x, adj, edge_weight, edge_attr, batch=, num_graphs=, node_mask=)``.
        batch: one device's :class:`Batch` (no device axis) with labels ``y``.
    """
    if batch.y is None:
        raise ValueError("batch: graph_losses needs graph labels: shard_graphs(graphs, y, ...)")
    edges = batch.adj if batch.adj is not None else batch.edge_index
    logits = model(batch.x, edges, batch.edge_weight, batch.edge_attr, batch=batch.batch,
                   num_graphs=batch.num_graphs, node_mask=batch.node_mask)
    logp = jax.nn.log_softmax(logits.astype(jnp.float32))
    labels = jnp.maximum(batch.y, 0)
    return -jnp.take_along_axis(logp, labels[:, None], axis=1)[:, 0]


def _is_variable(x) -> bool:
    return isinstance(x, nnx.Variable)


def _fold_keys(rest, device):
    """``rest`` with the device index folded into every RNG key."""
    return jax.tree.map(
        lambda v: v.copy(jax.random.fold_in(v[...], device)) if isinstance(v, nnx.RngKey)
        else v.copy(), rest, is_leaf=_is_variable)


def _keep_keys(new, old):
    """``new`` with the RNG keys of ``old`` (the folded keys stay inside)."""
    return jax.tree.map(lambda n, o: o if isinstance(n, nnx.RngKey) else n, new, old,
                        is_leaf=_is_variable)


def _local(params, rest, device, batch, *, graphdef, loss_fn):
    """One device: (loss sum over its real graphs, (real graph count, new rest))."""
    # _fold_keys rebuilds the state's Variables here, in this trace, so that the
    # model may update them (BatchNorm statistics, RNG counts) under jax.grad
    model = nnx.merge(graphdef, params, _fold_keys(rest, device))
    losses = loss_fn(model, batch)
    if losses.shape != (batch.num_graphs,):
        raise ValueError(f"loss_fn must return one loss per graph slot, shape "
                         f"({batch.num_graphs},); got {losses.shape}")
    total = jnp.sum(jnp.where(batch.graph_mask, losses, 0.0))
    count = jnp.sum(batch.graph_mask.astype(losses.dtype))
    _, _, new_rest = nnx.split(model, nnx.Param, ...)
    return total, (count, _keep_keys(new_rest, rest))


def _apply(params, updates):
    return jax.tree.map(lambda p, u: p + u.astype(p.dtype), params, updates)


def _check_batch(batch: Batch, n: int, fn: str):
    if not isinstance(batch, Batch):
        raise ValueError(f"batch: {fn} takes a gnncore Batch from shard_graphs; got "
                         f"{type(batch).__name__}")
    rows = np.shape(batch.graph_mask)
    if len(rows) != 2 or rows[0] != n:
        raise ValueError(f"batch: {fn} needs a leading device axis of {n} (shard_graphs("
                         f"..., num_devices={n}) then place); got graph_mask of shape {rows}")


def gspmd_step(tx, mesh: Mesh, *, loss_fn: Callable = graph_losses
               ) -> Callable[[TrainState, Batch], tuple[TrainState, Any]]:
    """A jitted data-parallel step, sharded by the compiler (GSPMD):
    ``step(state, batch) -> (state, loss)``.

    The model is ``jax.vmap``-ed over the batch's device axis; the loss is the
    mean over every real graph of every device, so the gradient is the one-device
    gradient on the same graphs. Because the device axis is sharded
    ``P(axis)`` and the parameters are replicated, XLA runs each device's group
    on that device and all-reduces the gradients. ``loss`` (before the update)
    and the new state come back replicated.

    Arguments:
        tx: the optimizer (see :func:`train_state`), the one the state was built with.
        mesh: the mesh the batch and state are on.
        loss_fn: ``loss_fn(model, batch) -> [num_graphs]`` per-graph losses of one
            device's batch (default :func:`graph_losses`).

    Takes a :func:`train_state` with ``per_device=False`` and a placed batch.
    BatchNorm normalises per device and its running averages are averaged over
    the devices (see the module docstring).
    """
    tx = _optax_like(tx)
    n = mesh.size
    replicated = NamedSharding(mesh, P())

    def step(state: TrainState, batch: Batch):
        local = partial(_local, graphdef=state.graphdef, loss_fn=loss_fn)

        def mean_loss(params):
            totals, (counts, rests) = jax.vmap(local, in_axes=(None, None, 0, 0))(
                params, state.rest, jnp.arange(n), batch)
            return jnp.sum(totals) / jnp.maximum(jnp.sum(counts), 1.0), rests

        (loss, rests), grads = jax.value_and_grad(mean_loss, has_aux=True)(state.params)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = _apply(state.params, updates)
        # the devices' running statistics, averaged; counts and keys are equal
        rest = jax.tree.map(
            lambda r: jnp.mean(r, axis=0) if jnp.issubdtype(r.dtype, jnp.inexact) else r[0],
            rests)
        new = TrainState(params, rest, opt_state, state.graphdef, 0)
        return jax.lax.with_sharding_constraint((new, loss), replicated)

    jitted = jax.jit(step)

    def run(state: TrainState, batch: Batch):
        if state.replicas:
            raise ValueError("state: gspmd_step takes one replicated copy: "
                             "train_state(..., per_device=False)")
        _check_batch(batch, n, "gspmd_step")
        return jitted(state, batch)

    run.jitted = jitted
    return run


def shard_map_step(tx, mesh: Mesh, *, average_grads: bool = True,
                   loss_fn: Callable = graph_losses
                   ) -> Callable[[TrainState, Batch], tuple[TrainState, Any]]:
    """A jitted data-parallel step written per device with ``jax.shard_map``:
    ``step(state, batch) -> (state, loss)``.

    Device ``d`` differentiates the loss sum of its own graphs on its own copy
    of the parameters; ``jax.lax.psum`` adds the gradient sums and the real
    graph counts of all devices, and every replica applies the gradient of the
    global mean (exact when devices hold different numbers of real graphs,
    unlike a ``pmean`` of local means) with its own copy of the optimizer
    state. The replicas start equal and so stay equal. ``loss`` (before the
    update) is the global mean, replicated.

    Arguments:
        tx: the optimizer (see :func:`train_state`), the one the state was built with.
        mesh: the mesh the batch and state are on.
        average_grads: ``False`` skips the all-reduce: each replica updates on
            the mean gradient of its own graphs only. Nothing fails — the
            replicas silently drift apart (:func:`replica_spread`); this is the
            classic data-parallel bug, kept for the lesson that shows it.
        loss_fn: per-graph losses of one device's batch (default
            :func:`graph_losses`).

    Takes a :func:`train_state` with ``per_device=True`` and a placed batch.
    BatchNorm statistics stay per replica.
    """
    tx = _optax_like(tx)
    n = mesh.size
    axis = _axis(mesh)

    def per_device(state: TrainState, batch: Batch):
        # every array here is this device's block: a leading axis of 1
        state, batch = jax.tree.map(lambda a: a[0], (state, batch))
        device = jax.lax.axis_index(axis)
        local = partial(_local, graphdef=state.graphdef, loss_fn=loss_fn)
        (total, (count, rest)), grads = jax.value_and_grad(local, has_aux=True)(
            state.params, state.rest, device, batch)
        everyone = jnp.maximum(jax.lax.psum(count, axis), 1.0)
        if average_grads:
            grads = jax.tree.map(lambda g: jax.lax.psum(g, axis) / everyone, grads)
        else:
            grads = jax.tree.map(lambda g: g / jnp.maximum(count, 1.0), grads)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        new = TrainState(_apply(state.params, updates), rest, opt_state, state.graphdef,
                         state.replicas)
        loss = jax.lax.psum(total, axis) / everyone
        return jax.tree.map(lambda a: a[None], new), loss

    # check_vma=False: the CSR kernel of gnncore.sparse (gnncore.csr_kernel
    # inside a custom VJP) drops JAX's "varies over the mesh axis" type on its
    # gradients, which the check would reject; the program itself is the same
    jitted = jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=(P(axis), P(axis)),
                                   out_specs=(P(axis), P()), check_vma=False))

    def run(state: TrainState, batch: Batch):
        if state.replicas != n:
            raise ValueError(f"state: shard_map_step needs one copy per device ({n}): "
                             f"train_state(..., per_device=True); got replicas="
                             f"{state.replicas}")
        _check_batch(batch, n, "shard_map_step")
        return jitted(state, batch)

    run.jitted = jitted
    return run


# --------------------------------------------------------------- replicas
@functools.lru_cache(maxsize=64)
def _replicated(fn: Callable, mesh: Mesh):
    """``jax.jit(fn)`` with replicated results (readable by every process);
    one per function and mesh, so that repeated calls compile once."""
    return jax.jit(fn, out_shardings=NamedSharding(mesh, P()))


def _gather(fn, *args):
    """``fn(*args)`` on the arguments' mesh, returned replicated."""
    leaves = [leaf for leaf in jax.tree.leaves(args) if isinstance(leaf, jax.Array)]
    sharding = leaves[0].sharding if leaves else None
    if not isinstance(sharding, NamedSharding):
        return fn(*args)
    return _replicated(fn, sharding.mesh)(*args)


def _take(tree, index):
    return jax.tree.map(lambda a: a[index], tree)


def _norm_sq(params):
    return sum(jnp.sum(jnp.square(a.astype(jnp.float32))) for a in jax.tree.leaves(params))


def _per_replica_sq(params):
    return sum(jnp.sum(jnp.square(a.astype(jnp.float32)).reshape(a.shape[0], -1), axis=1)
               for a in jax.tree.leaves(params))


def _spread(params):
    return jnp.max(jnp.stack([jnp.max(jnp.abs(a - a[:1])) for a in jax.tree.leaves(params)]))


def replica_param_norms(state: TrainState) -> np.ndarray:
    """The global parameter norm of every replica: ``[N]`` (host).

    Equal entries mean equal-sized replicas; after a few steps of
    :func:`shard_map_step` with ``average_grads=False`` they differ. A
    replicated (``per_device=False``) state has one copy: ``[1]``.

    Arguments:
        state: a :class:`TrainState`.
    """
    if not state.replicas:
        return np.sqrt(np.asarray(_gather(_norm_sq, state.params), np.float64)).reshape(1)
    return np.sqrt(np.asarray(_gather(_per_replica_sq, state.params), np.float64))


def replica_spread(state: TrainState) -> float:
    """The largest absolute difference between any parameter of any replica and
    that of replica 0 (host). ``0.0`` for a replicated state; stays ``0`` (up
    to rounding) under :func:`shard_map_step` with averaging.

    Arguments:
        state: a :class:`TrainState`.
    """
    if not state.replicas:
        return 0.0
    return float(_gather(_spread, state.params))
