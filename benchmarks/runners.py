"""How a benchmark builds, warms and times one training step per peer.

The peers: **gnncore** and **JraphX** train with one functional ``jax.jit`` step
(``nnx.split((model, optimizer))`` outside; inside ``nnx.merge``,
``nnx.value_and_grad``, ``optimizer.update``, and ``nnx.state`` and the loss
returned), timed with ``block_until_ready``; **PyG** trains eagerly with
``torch.optim.Adam`` (``pyg``: ``--torch-threads`` torch threads, ``pyg1``: one).
Every step is forward + backward + an Adam update (lr 0.01).

A runner holds a model, its optimizer and a list of inputs (one graph for node
classification, a stream of batches for graph classification) and cycles
through them. :func:`time_rows` builds the runners of one table row group, takes
each one's first call and warm-up, then times them in rounds that alternate
between the peers (so that slow drifts in machine load hit all of them alike);
:func:`summarise` turns that into the result dicts the tables print.

``bench_layers``, ``bench_breadth``, ``bench_variants``, ``page_faults`` and
``compile_cache`` all time their steps here. Benchmark-only code.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import (
    GraphData,
    fmt,
    load_average,
    machine_info,
    median_ms,
    print_table,
    timeit,
    versions,
)

LR = 1e-2
FRAMEWORKS = ("gnncore", "jraphx", "pyg", "pyg1")
# "pyg" runs torch with torch.set_num_threads(--torch-threads, default os.cpu_count());
# "pyg1" is the same model with one torch thread: on a shared, loaded machine
# torch's OpenMP threads can wait on each other, and one thread is then faster.
PYG = ("pyg", "pyg1")
JAX = ("gnncore", "jraphx")
NEEDS = {"jraphx": "jraphx", "pyg": "torch_geometric", "pyg1": "torch_geometric"}
VERSIONS = ["jax", "jaxlib", "flax", "optax", "jraphx", "torch", "torch-geometric", "numpy"]


# ================================================================ models
@functools.cache
def _two_layer_nnx():
    from flax import nnx

    class TwoLayer(nnx.Module):
        def __init__(self, c1, c2, act):
            self.c1, self.c2, self.act = c1, c2, act

        def __call__(self, x, edge_index):
            return self.c2(self.act(self.c1(x, edge_index)), edge_index)

    return TwoLayer


@functools.cache
def _two_layer_torch():
    import torch

    class TwoLayer(torch.nn.Module):
        def __init__(self, c1, c2, act):
            super().__init__()
            self.c1, self.c2, self.act = c1, c2, act

        def forward(self, x, edge_index):
            return self.c2(self.act(self.c1(x, edge_index)), edge_index)

    return TwoLayer


def two_layer_nnx(c1, c2, act):
    """``c2(act(c1(x, g)), g)`` as an ``nnx.Module`` (JraphX convs, prototypes)."""
    return _two_layer_nnx()(c1, c2, act)


def two_layer_torch(c1, c2, act):
    """``c2(act(c1(x, edge_index)), edge_index)`` as a ``torch.nn.Module`` (PyG convs)."""
    return _two_layer_torch()(c1, c2, act)


# ================================================================ JAX peers
def jax_train_step(graphdef, loss_fn, counter: list | None = None):
    """A fresh jitted training step ``step(state, data) -> (state, loss)`` (a new
    function object, so nothing is cached). ``loss_fn(model, data)``; ``counter``
    (a one-item list) counts traces, i.e. compiles, since every trace of a new
    shape is compiled."""
    import jax
    from flax import nnx

    def step(state, data):
        if counter is not None:
            counter[0] += 1  # Python side effect: runs once per trace
        model, optimizer = nnx.merge(graphdef, state)
        loss, grads = nnx.value_and_grad(lambda m: loss_fn(m, data))(model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    return jax.jit(step)


def node_loss(model, data):
    """Mean softmax cross-entropy over all nodes of ``data = (x, graph, y)``."""
    import optax

    x, edges, y = data
    return optax.softmax_cross_entropy_with_integer_labels(model(x, edges), y).mean()


class JaxRunner:
    """A gnncore or JraphX model with Adam and its jitted step, over a list of
    inputs that it cycles through."""

    def __init__(self, model, inputs: list, loss_fn=node_loss):
        import jax
        import optax
        from flax import nnx

        self.inputs, self.i, self.loss_fn = inputs, 0, loss_fn
        optimizer = nnx.Optimizer(model, optax.adam(LR), wrt=nnx.Param)
        self.graphdef, self.state = nnx.split((model, optimizer))
        jax.block_until_ready((self.inputs, self.state))
        self.sync = jax.block_until_ready
        self.traces = [0]
        self.jitted = jax_train_step(self.graphdef, loss_fn, self.traces)

    def _next(self):
        data = self.inputs[self.i]
        self.i = (self.i + 1) % len(self.inputs)
        return data

    def step(self):
        self.state, loss = self.jitted(self.state, self._next())
        return self.state, loss

    def timed_step(self) -> tuple[float, float, bool]:
        """One synced step: (seconds, loss, whether it traced and compiled)."""
        before = self.traces[0]
        t0 = time.perf_counter()
        state, loss = self.step()
        self.sync((state, loss))
        return time.perf_counter() - t0, float(loss), self.traces[0] > before

    def loss_on(self, k: int) -> float:
        """The loss of a step on input ``k`` (the step is applied)."""
        self.state, loss = self.jitted(self.state, self.inputs[k])
        return float(loss)

    def memory(self) -> dict[str, int | None]:
        """XLA's own account of the compiled step (``compiled.memory_analysis()``,
        per device for a sharded step): bytes of ``arguments``, ``outputs``,
        ``temps`` (scratch buffers), ``alias`` (outputs that reuse argument
        buffers) and ``peak`` (``None`` where the backend does not say). Lowers
        and compiles the step once more (the compile cache usually answers)."""
        stats = self.jitted.lower(self.state, self.inputs[0]).compile().memory_analysis()
        get = lambda name: None if stats is None else getattr(stats, name, None)
        return {"arguments": get("argument_size_in_bytes"),
                "outputs": get("output_size_in_bytes"), "temps": get("temp_size_in_bytes"),
                "alias": get("alias_size_in_bytes"), "peak": get("peak_memory_in_bytes")}

    def breakdown(self) -> tuple[float, float]:
        """AOT timings of a fresh jit of the step: (trace+lower s, XLA compile s)."""
        fresh = jax_train_step(self.graphdef, self.loss_fn)
        t0 = time.perf_counter()
        lowered = fresh.lower(self.state, self.inputs[0])
        t1 = time.perf_counter()
        lowered.compile()
        return t1 - t0, time.perf_counter() - t1


# ================================================================ PyG peer
class PygRunner:
    """A PyG model with torch.optim.Adam, eager, over a list of inputs
    ``(x, edge_index, batch_or_None, y)`` that it cycles through."""

    def __init__(self, model, inputs: list, *, threads: int):
        import torch

        self.torch, self.threads = torch, threads
        torch.set_num_threads(threads)
        self.model, self.inputs, self.i = model, inputs, 0
        self.model.train()  # dropout is 0 everywhere, so train mode does the same work
        self.opt = torch.optim.Adam(self.model.parameters(), lr=LR)
        self.sync = lambda loss: loss.item()

    def _run(self, data):
        import torch.nn.functional as F

        if self.torch.get_num_threads() != self.threads:  # "pyg" and "pyg1" alternate
            self.torch.set_num_threads(self.threads)
        x, edge_index, batch, y = data
        self.opt.zero_grad(set_to_none=True)
        out = self.model(x, edge_index) if batch is None else self.model(x, edge_index, batch)
        loss = F.cross_entropy(out, y)
        loss.backward()
        self.opt.step()
        return loss

    def step(self):
        data = self.inputs[self.i]
        self.i = (self.i + 1) % len(self.inputs)
        return self._run(data)

    def timed_step(self) -> tuple[float, float, bool]:
        t0 = time.perf_counter()
        loss = float(self.step().item())
        return time.perf_counter() - t0, loss, False

    def loss_on(self, k: int) -> float:
        return float(self._run(self.inputs[k]).item())


# ================================================================ node classification
def node_inputs(fw: str, g: GraphData, *, dense_features: bool | str = False, model=None):
    """One graph as ``fw`` takes it: gnncore ``(x, graph.adj, y)`` (the documented
    fast path: ``Graph.from_arrays`` validates, sorts by target and builds the CSR
    view that sum/mean layers aggregate with, and ``graph.adj.for_model(model)``
    adds the index arrays of ``model``'s multi-head attention products; large
    mostly-zero features, Cora's 1.3 %, as CSR ``SparseFeatures`` by
    ``gnncore.sparse_if_mostly_zero``, as the explorer gives them, so the first
    ``x @ W`` costs the non-zeros only, unless ``dense_features``: then the dense
    matrix, or with ``"transposed"`` the same matrix as ``DenseFeatures`` (plus a
    transposed copy for the weight gradient); other features stay dense), JraphX
    ``(x, edge_index, y)``, PyG ``(x, edge_index, None, y)`` tensors."""
    if fw in PYG:
        import torch

        return (torch.from_numpy(g.x), torch.from_numpy(g.edge_index.astype("int64")), None,
                torch.from_numpy(g.y.astype("int64")))
    if fw == "gnncore":
        from gnncore import DenseFeatures, Graph, sparse_if_mostly_zero

        graph = Graph.from_arrays(g.edge_index, g.x, y=g.y)
        if dense_features == "transposed":
            x = DenseFeatures.from_dense(g.x)
        else:
            # graph.x: on the device (the host array would be copied to it every step)
            x = graph.x if dense_features else sparse_if_mostly_zero(graph.x)
        adj = graph.adj if model is None else graph.adj.for_model(model)
        return (x, adj, graph.y)
    import jax.numpy as jnp

    return (jnp.asarray(g.x), jnp.asarray(g.edge_index), jnp.asarray(g.y))


def node_runner(fw: str, kind: str, g: GraphData, builders: dict[str, Callable], *,
                torch_threads: int = 1, seed: int = 0, dense_features: bool | str = False):
    """The runner of ``fw`` for model ``kind`` on ``g``. ``builders`` maps
    "gnncore", "jraphx" and "pyg" to ``build(kind, g, seed) -> model``.
    ``dense_features``: gnncore too gets mostly-zero features dense
    (``"transposed"``: as ``DenseFeatures``; see :func:`node_inputs`)."""
    model = builders["pyg" if fw in PYG else fw](kind, g, seed)
    inputs = [node_inputs(fw, g, dense_features=dense_features, model=model)]
    if fw in PYG:
        return PygRunner(model, inputs, threads=torch_threads if fw == "pyg" else 1)
    return JaxRunner(model, inputs)


# ================================================================ timing
def warm_up(r, warmup: int, cap_s: float | None = None) -> None:
    """``warmup`` untimed steps; with ``cap_s``, stop after that many seconds."""
    t0 = time.perf_counter()
    for _ in range(warmup):
        r.sync(r.step())
        if cap_s is not None and time.perf_counter() - t0 > cap_s:
            break


def interleave(runners: dict, results: dict, *, steps: int, rounds: int,
               max_row_s: float | None = None) -> None:
    """The timed steps in ``rounds`` blocks alternating between the runners
    (one untimed step after each switch, to re-warm caches), appended to
    ``results[name]["times"]``.

    With ``max_row_s``, a row stops a round early once it has spent
    ``max_row_s / rounds`` seconds in it (at least 2 steps per round): under
    load, torch with 2 threads can take over a second per step, and the run
    must still end in minutes."""
    per_round = [steps // rounds + (i < steps % rounds) for i in range(rounds)]
    budget = None if max_row_s is None else max_row_s / rounds
    for n in per_round:
        for name, r in runners.items():
            timeit(r.step, r.sync, steps=0, warmup=1)
            spent, times = 0.0, results[name]["times"]
            for k in range(n):
                if budget is not None and k >= 2 and spent > budget:
                    break
                t = timeit(r.step, r.sync, steps=1, warmup=0)[0]
                times.append(t)
                spent += t


def time_rows(makers: dict[str, Callable], *, steps: int, warmup: int, rounds: int,
              max_row_s: float | None = None,
              warmup_cap_s: float | None = None) -> tuple[dict, dict]:
    """Build each runner (``makers[name]()``), time its first call (trace +
    compile + one step) and warm it up, then time all of them with
    :func:`interleave`. Returns (runners, results); a result holds ``first_s``,
    ``loss0`` (the first call's loss) and ``times`` (seconds per timed step)."""
    runners, results = {}, {}
    for name, make in makers.items():
        gc.collect()
        time.sleep(0.2)  # let the previous peer's worker threads go idle
        r = make()
        first, loss0, _ = r.timed_step()
        warm_up(r, warmup, warmup_cap_s)
        runners[name], results[name] = r, {"first_s": first, "loss0": loss0, "times": []}
    interleave(runners, results, steps=steps, rounds=rounds, max_row_s=max_row_s)
    return runners, results


def summarise(runners: dict, results: dict, *, breakdown: bool, label: str,
              **tags) -> list[dict]:
    """Per runner: ``loss1`` (the loss of one more step on input 0), the median
    and min step, ``compile_s`` (first call - median step, JAX peers only),
    with ``breakdown`` the AOT ``lower_s`` / ``xla_s`` of a fresh jit, and
    ``tags`` plus ``framework``. Prints a progress line per runner."""
    out = []
    for fw, r in runners.items():
        res = results[fw]
        res["loss1"] = r.loss_on(0)
        res["median_ms"], res["min_ms"] = median_ms(res["times"]), 1e3 * min(res["times"])
        jax_fw = fw in JAX
        res["compile_s"] = res["first_s"] - res["median_ms"] / 1e3 if jax_fw else None
        if breakdown and jax_fw:
            res["lower_s"], res["xla_s"] = r.breakdown()
        res.update(tags, framework=fw)
        out.append(res)
        print(f"  done {label} {fw:7s} median {res['median_ms']:8.2f} ms"
              f"  first call {res['first_s']:.2f} s", flush=True)
    return out


# ================================================================ tables
def ratio(base: float | None, other: float | None) -> str:
    return "-" if base is None or other is None else f"{base / other:.2f}"


def print_step_table(results: list[dict], *, title: str, n_column: bool = False) -> None:
    """One row per (shape, model, framework): first call, compile, AOT breakdown,
    median and min step, (timed steps,) loss before -> after."""
    rows = [[r["shape"], r["model"], r["framework"], fmt(r["first_s"], ".2f"),
             fmt(r["compile_s"], ".2f"), fmt(r.get("lower_s"), ".2f"),
             fmt(r.get("xla_s"), ".2f"), f"{r['median_ms']:.2f}", f"{r['min_ms']:.2f}",
             *([len(r["times"])] if n_column else []),
             f"{r['loss0']:.3f} -> {r['loss1']:.3f}"] for r in results]
    print_table(["shape", "model", "framework", "first call s", "compile s", "trace+lower s",
                 "XLA compile s", "median step ms", "min step ms", *(["n"] if n_column else []),
                 "loss"], rows, title=title)


def print_ratio_table(results: list[dict], graphs: list[GraphData], models: list[str], *,
                      target: Callable[[dict, dict], str], target_header: str,
                      title: str) -> None:
    """Per (shape, model): gnncore's median step over each peer's, compile s of
    gnncore / JraphX, and ``target(gnncore result, {peer: median ms or None})``."""
    by = {(r["shape"], r["model"], r["framework"]): r for r in results}
    rows = []
    for g in graphs:
        for kind in models:
            base = by.get((g.name, kind, "gnncore"))
            if base is None:
                continue
            ms = {fw: by[(g.name, kind, fw)]["median_ms"] if (g.name, kind, fw) in by
                  else None for fw in ("jraphx", "pyg", "pyg1")}
            jx = by.get((g.name, kind, "jraphx"))
            rows.append([g.name, kind, *(ratio(base["median_ms"], v) for v in ms.values()),
                         f"{base['compile_s']:.2f}" + ("" if jx is None
                                                       else f" / {jx['compile_s']:.2f}"),
                         target(base, ms)])
    if rows:
        print_table(["shape", "model", "step gnncore/JraphX", "step gnncore/PyG",
                     "step gnncore/PyG 1 thread", "compile s gnncore / JraphX",
                     target_header], rows, title=title)


# ================================================================ command line
def add_step_options(p: argparse.ArgumentParser, *, quick_help: str) -> None:
    """The options every peer comparison takes."""
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--steps", type=int, default=None,
                   help="timed steps per row (default 40; 10 with --quick)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed steps before timing (default 5; 2 with --quick)")
    p.add_argument("--rounds", type=int, default=None,
                   help="blocks the timed steps are split into, alternating frameworks "
                        "(default 4; 2 with --quick)")
    p.add_argument("--only", default=",".join(FRAMEWORKS),
                   help="comma list of frameworks: gnncore,jraphx,pyg,pyg1")
    p.add_argument("--torch-threads", type=int, default=os.cpu_count(),
                   help="torch.set_num_threads for the pyg rows (default: os.cpu_count())")
    p.add_argument("--no-breakdown", action="store_true",
                   help="skip the AOT trace/compile breakdown of the JAX steps")
    p.add_argument("--json", type=Path, default=None, help="also write results here")


@dataclass
class StepSettings:
    steps: int
    warmup: int
    rounds: int
    breakdown: bool
    frameworks: list[str]
    torch_threads: int


def step_settings(p: argparse.ArgumentParser, args) -> StepSettings:
    """The options of :func:`add_step_options` resolved; the frameworks whose
    package is not installed are left out, and said so."""
    steps = args.steps or (10 if args.quick else 40)
    frameworks = [f for f in args.only.split(",") if f]
    for f in frameworks:
        if f not in FRAMEWORKS:
            p.error(f"unknown framework {f!r}")
    missing = [f for f in frameworks if f in NEEDS and importlib.util.find_spec(NEEDS[f]) is None]
    if missing:
        print(f"skipping {', '.join(missing)}: not installed "
              "(pip install -r requirements-bench.txt)")
    return StepSettings(
        steps=steps,
        warmup=args.warmup if args.warmup is not None else (2 if args.quick else 5),
        rounds=max(1, min(steps, args.rounds or (2 if args.quick else 4))),
        breakdown=not (args.quick or args.no_breakdown),
        frameworks=[f for f in frameworks if f not in missing],
        torch_threads=args.torch_threads)


def print_machine() -> tuple[dict, dict]:
    """Print and return the machine and the package versions."""
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory']}; "
          f"python {info['python']}; load average {load_average()}")
    vers = versions(VERSIONS)
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()))
    return info, vers


def start_backends(frameworks: list[str], torch_threads: int) -> None:
    """Start JAX's backend (outside any timing) and print the torch threads."""
    if any(f in JAX for f in frameworks):
        # gnncore before the backend starts: its XLA flags (gnncore/xla.py), as a user gets them;
        # the JAX peers share this process, so JraphX runs with them too
        import jax
        import jax.numpy as jnp

        import gnncore  # noqa: F401

        jax.block_until_ready(jax.jit(lambda a: a + 1)(jnp.ones(3)))
        print(f"jax backend: {jax.default_backend()}, devices {jax.devices()}; "
              f"XLA_FLAGS {os.environ.get('XLA_FLAGS', '')!r}")
    if any(f in PYG for f in frameworks):
        print(f"torch threads: pyg {torch_threads}, pyg1 1 (os.cpu_count() = {os.cpu_count()})")


def write_json(path: Path, report: dict, parts: tuple[str, ...] = ("results",)) -> None:
    """``report`` as JSON, each result's step times in ms (``times_ms``)."""
    for part in parts:
        for r in report.get(part, []):
            r["times_ms"] = [1e3 * t for t in r.pop("times")]
    path.write_text(json.dumps(report, indent=1, default=str))
