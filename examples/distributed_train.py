"""Data-parallel graph classification on JAX's own distributed runtime.

The same script runs on one process, on several processes of one machine, or
on several GPU hosts; only the launch differs. Every process builds the same
synthetic dataset and model (seeded), deals the graphs to the devices of one
1-D mesh that spans every process (``gnncore.parallel``), and trains with one
of two data-parallel steps: ``gspmd`` (``jax.jit``, the compiler inserts the
all-reduce) or ``shard_map`` (``jax.shard_map`` + ``jax.lax.psum``). It prints
JSON lines: a ``setup`` line, one ``step`` line per step with the loss (the
global mean over every real graph, identical on every process) and a ``done``
line.

One process, 2 CPU devices::

    python examples/distributed_train.py --cpu-devices 2

Two processes on this machine (1 CPU device each, gloo collectives over TCP)::

    python examples/distributed_train.py --coordinator 127.0.0.1:12355 \\
        --num-processes 2 --process-id 0 &
    python examples/distributed_train.py --coordinator 127.0.0.1:12355 \\
        --num-processes 2 --process-id 1

Two GPU hosts (all local GPUs of each; run on both, ``--process-id`` 0 on the
host whose address is the coordinator)::

    python examples/distributed_train.py --coordinator 10.0.0.1:12355 \\
        --num-processes 2 --process-id 0      # on 10.0.0.1
    python examples/distributed_train.py --coordinator 10.0.0.1:12355 \\
        --num-processes 2 --process-id 1      # on the other host

The three flags may also come from the environment: ``JAX_COORDINATOR_ADDRESS``,
``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``. Under Slurm or Open MPI pass
``--auto-cluster`` instead: ``jax.distributed.initialize()`` reads them itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
if (_REPO / "gnncore").is_dir() and str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))  # run from a checkout without installing


def parse_args(argv=None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--coordinator", default=env("JAX_COORDINATOR_ADDRESS"),
                   help="host:port of process 0's coordinator (env JAX_COORDINATOR_ADDRESS)")
    p.add_argument("--num-processes", type=int, default=int(env("JAX_NUM_PROCESSES", "1")),
                   help="number of processes (env JAX_NUM_PROCESSES; default 1)")
    p.add_argument("--process-id", type=int, default=int(env("JAX_PROCESS_ID", "0")),
                   help="this process's index, 0 .. num-processes-1 (env JAX_PROCESS_ID)")
    p.add_argument("--auto-cluster", action="store_true",
                   help="let jax.distributed.initialize() detect Slurm / Open MPI")
    p.add_argument("--init-timeout", type=int, default=300,
                   help="seconds to wait for every process to join")
    p.add_argument("--cpu-devices", type=int, default=None,
                   help="force this many local CPU devices (sets XLA_FLAGS before JAX "
                        "starts; for trying several devices on one machine)")
    p.add_argument("--devices", type=int, default=None,
                   help="use the first N devices of all processes (default: all)")
    p.add_argument("--form", default="gspmd",
                   help="gspmd, shard_map, or both one after the other: gspmd,shard_map")
    p.add_argument("--no-average", action="store_true",
                   help="shard_map without the gradient all-reduce: the replicas drift")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--graphs", type=int, default=30, help="dataset size (graphs)")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def dataset(count: int, seed: int):
    """``count`` small graphs, two classes (rings vs stars, with random chords),
    node features ``[1, degree / 4, noise]``; the same in every process."""
    import numpy as np

    from gnncore import Graph

    rng = np.random.default_rng(seed)
    graphs, labels = [], []
    for i in range(count):
        n, label = int(rng.integers(4, 13)), i % 2
        nodes = np.arange(n)
        src, dst = ((nodes, (nodes + 1) % n) if label == 0
                    else (np.zeros(n - 1, int), nodes[1:]))
        chords = rng.integers(0, n, (2, int(rng.integers(0, 3))))
        src, dst = np.concatenate([src, chords[0]]), np.concatenate([dst, chords[1]])
        keep = src != dst
        edges = np.stack([src[keep], dst[keep]])
        edges = np.unique(np.concatenate([edges, edges[::-1]], axis=1), axis=1)
        degree = np.bincount(edges[1], minlength=n)
        x = np.stack([np.ones(n), degree / 4.0, rng.normal(size=n)], axis=1)
        graphs.append(Graph.from_arrays(edges, x.astype(np.float32)))
        labels.append(label)
    return graphs, labels


def build_model(seed: int):
    from flax import nnx

    from gnncore import GNN, ConvSpec

    # built under one jit: one compiled program, not one per initialiser
    return nnx.jit(lambda: GNN(3, [ConvSpec("gcn", 16), ConvSpec("gcn", 16)], out_features=2,
                               head=True, pool="mean", rngs=nnx.Rngs(seed)))()


def main(argv=None) -> int:
    args = parse_args(argv)
    forms = args.form.split(",")
    if not forms or set(forms) - {"gspmd", "shard_map"}:
        raise SystemExit(f"--form: gspmd, shard_map or gspmd,shard_map; got {args.form!r}")
    if args.cpu_devices:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_"
                                   f"platform_device_count={args.cpu_devices}").strip()

    import jax

    # gloo: JAX's TCP collectives for CPU processes (GPUs use NCCL on their own)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if args.auto_cluster:
        jax.distributed.initialize(initialization_timeout=args.init_timeout)
    elif args.num_processes > 1:
        if not args.coordinator:
            raise SystemExit("--num-processes > 1 needs --coordinator host:port "
                             "(or JAX_COORDINATOR_ADDRESS)")
        host = args.coordinator.rsplit(":", 1)[0]
        # a coordinator on the loopback address listens there only
        bind = args.coordinator if host in ("127.0.0.1", "localhost") else None
        jax.distributed.initialize(coordinator_address=args.coordinator,
                                   num_processes=args.num_processes,
                                   process_id=args.process_id,
                                   coordinator_bind_address=bind,
                                   initialization_timeout=args.init_timeout)

    import optax

    from gnncore import parallel

    mesh = parallel.data_mesh(args.devices)
    graphs, labels = dataset(args.graphs, args.seed)
    batch = parallel.place(parallel.shard_graphs(graphs, labels, mesh.size), mesh)
    tx = optax.adam(args.lr)

    def emit(**record):
        print(json.dumps({"process": jax.process_index(), **record}), flush=True)

    emit(event="setup", processes=jax.process_count(), devices=mesh.size,
         local_devices=jax.local_device_count(), platform=jax.devices()[0].platform,
         graphs=len(graphs), graph_slots_per_device=batch.num_graphs)
    model = build_model(args.seed)  # every process builds the same model: the same seed
    for form in forms:
        shard_map = form == "shard_map"
        state = parallel.train_state(model, tx, mesh, per_device=shard_map)
        step = (parallel.shard_map_step(tx, mesh, average_grads=not args.no_average)
                if shard_map else parallel.gspmd_step(tx, mesh))
        start = time.perf_counter()
        for i in range(args.steps):
            state, loss = step(state, batch)
            emit(event="step", form=form, step=i, loss=float(loss),
                 seconds=round(time.perf_counter() - start, 4))
        emit(event="done", form=form, spread=parallel.replica_spread(state),
             norms=parallel.replica_param_norms(state).tolist())
    if jax.process_count() > 1:
        jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
