"""Two processes on JAX's own distributed runtime (``jax.distributed``, gloo
collectives over TCP on 127.0.0.1, one CPU device each) run
``examples/distributed_train.py`` and train exactly as one process does on the
same graphs."""

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import REPO, xla_flags
from flax import nnx

from gnncore import Batch
from gnncore.parallel import graph_losses

SCRIPT = REPO / "examples" / "distributed_train.py"
STEPS, GRAPHS, LR = 10, 7, 1e-2  # 7 graphs: 4 and 3 per process, padded
DEADLINE_S = 240


def _gloo_missing() -> str:
    """Why this jaxlib cannot run CPU collectives across processes ("" if it can)."""
    try:
        from jax._src.lib import _jax
    except ImportError as err:  # pragma: no cover - a jaxlib without the extension
        return f"jaxlib has no _jax extension: {err}"
    if not hasattr(_jax, "make_gloo_tcp_collectives"):  # pragma: no cover
        return "this jaxlib was built without gloo CPU collectives"
    return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _example():
    spec = importlib.util.spec_from_file_location("distributed_train", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference_losses(example) -> list[float]:
    """One process, one device, no gnncore.parallel: the same graphs, model and
    optimizer in one padded batch."""
    graphs, labels = example.dataset(GRAPHS, 0)
    batch = Batch.from_graphs(graphs, labels)
    model = example.build_model(0)
    optimizer = nnx.Optimizer(model, optax.adam(LR), wrt=nnx.Param)

    @nnx.jit
    def step(model, optimizer):
        def loss_fn(model):
            losses = graph_losses(model, batch)
            w = batch.graph_mask.astype(losses.dtype)
            return jnp.sum(losses * w) / jnp.sum(w)

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    return [float(step(model, optimizer)) for _ in range(STEPS)]


def _records(stdout: str) -> list[dict]:
    # gloo prints its own lines ("[Gloo] Rank 0 is connected ...") on stdout
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def two_processes():
    missing = _gloo_missing()
    if missing:
        pytest.skip(missing)
    address = f"127.0.0.1:{_free_port()}"
    flags = [f for f in xla_flags().split() if "device_count" not in f]  # 1 device each
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=" ".join(flags))
    procs = [subprocess.Popen(
        [sys.executable, str(SCRIPT), "--coordinator", address, "--num-processes", "2",
         "--process-id", str(i), "--steps", str(STEPS), "--graphs", str(GRAPHS),
         "--lr", str(LR), "--form", "gspmd,shard_map", "--init-timeout", "120"],
        env=env, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in range(2)]
    try:
        # the one-process reference trains here while the two start
        reference = _reference_losses(_example())
        deadline = time.monotonic() + DEADLINE_S
        outputs = []
        for proc in procs:
            try:
                outputs.append(proc.communicate(timeout=max(deadline - time.monotonic(), 1)))
            except subprocess.TimeoutExpired:
                pytest.fail(f"the two processes took over {DEADLINE_S} s")
        for i, (proc, (_, stderr)) in enumerate(zip(procs, outputs)):
            assert proc.returncode == 0, f"process {i} failed:\n{stderr[-4000:]}"
        return reference, [_records(stdout) for stdout, _ in outputs]
    finally:
        for proc in procs:  # by PID, on any failure
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_two_processes_form_one_mesh(two_processes):
    _, runs = two_processes
    for i, records in enumerate(runs):
        (setup,) = [r for r in records if r["event"] == "setup"]
        assert setup == {"process": i, "event": "setup", "processes": 2, "devices": 2,
                         "local_devices": 1, "platform": "cpu", "graphs": GRAPHS,
                         "graph_slots_per_device": setup["graph_slots_per_device"]}


@pytest.mark.parametrize("form", ["gspmd", "shard_map"])
def test_two_processes_train_like_one(two_processes, form):
    reference, runs = two_processes
    assert reference[-1] < reference[0]
    for records in runs:
        losses = [r["loss"] for r in records if r["event"] == "step" and r["form"] == form]
        assert len(losses) == STEPS
        np.testing.assert_allclose(losses, reference, rtol=0, atol=1e-5)
    (done0,), (done1,) = ([r for r in rec if r["event"] == "done" and r["form"] == form]
                          for rec in runs)
    assert done0["spread"] <= 1e-6 and done0["norms"] == done1["norms"]
