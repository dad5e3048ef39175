"""Scale benchmark: full-batch GCN and GraphSAGE on a graph the size of ogbn-arxiv.

The graph is synthetic, generated with seeded numpy, never downloaded: 169,343
nodes, 1,166,243 directed edges, 128 standard-normal features, 40 classes
(``--scale F`` multiplies the node and edge counts, e.g. 0.1 for a quick run).
Edges are uniform at random unless ``--locality L``: then a share ``L`` of them
comes from a node at most ``N / 100`` ids away from its target (as in a citation
graph ordered by time), which is what lets a partition's halo be small.

Two parts, in one run:

1. **Peers** (this process): a two-layer GCN and GraphSAGE (mean), hidden
   ``--hidden``, trained full-batch with Adam in gnncore, JraphX and PyG,
   built and timed by ``benchmarks/runners.py`` (the models of
   ``bench_layers``): median step (``block_until_ready``) after warm-up, in
   rounds alternating the peers. Memory: for the JAX peers XLA's own account
   of the compiled step (``compiled.memory_analysis()``: arguments, outputs,
   temporaries, peak); for every peer the RSS peak during one step over the RSS
   before it, sampled every 0.5 ms (torch's CPU allocator keeps no statistics;
   this is a lower bound, see ``common.rss_peak_delta``). The ratio gnncore/PyG
   per step has the target <= 0.5.
2. **Partitioned** (``gnncore.partition``; one child process per device count,
   ``--parts``, with ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` on
   CPU): the same gnncore models on the graph split by node over N devices,
   remote features by all-gather or by halo (``--exchanges``): step time,
   XLA's memory per device, the rows each device receives per layer, and a
   correctness check (the first steps' losses against the unpartitioned
   model on one device). Forced CPU devices share the same cores, so this
   measures the partitioning's overhead, not a speed-up.

On a machine with a GPU the same command records the table there: JAX takes
``jax.devices()`` (or ``--platform``) and the device kind is printed; PyG stays
on the CPU (the project installs torch's CPU build), so its rows are CPU rows.
Device counts beyond the devices present are skipped (forced devices exist on
the CPU platform only).

Usage (from the repository root)::

    python -m benchmarks.bench_scale --scale 0.1    # quick (~2-3 min on 2 cores)
    python -m benchmarks.bench_scale                # ogbn-arxiv's size
    python -m benchmarks.bench_scale --only gnncore --parts 1,2,4 --locality 0.9
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from functools import partial

import numpy as np

from benchmarks.bench_layers import BUILDERS, build_gnncore
from benchmarks.common import (
    GraphData,
    fmt,
    load_average,
    print_table,
    rss_peak_delta,
    sort_by_target,
)
from benchmarks.runners import (
    JAX,
    JaxRunner,
    add_step_options,
    node_runner,
    print_machine,
    print_ratio_table,
    print_step_table,
    start_backends,
    step_settings,
    summarise,
    time_rows,
    write_json,
)

ARXIV = {"nodes": 169_343, "edges": 1_166_243, "features": 128, "classes": 40}
MODELS = ("gcn", "sage")
EXCHANGES = ("all_gather", "halo")
CHECK_STEPS = 3  # steps whose losses the partitioned runs compare
MB = 2**20


# ---------------------------------------------------------------- the graph
def arxiv_like(scale: float = 1.0, *, locality: float = 0.0, seed: int = 0) -> GraphData:
    """ogbn-arxiv's shape times ``scale``: uniform random directed edges (no
    self-loops), a share ``locality`` of them from within ``N / 100`` ids of
    the target; standard-normal features, uniform labels. Seeded numpy."""
    n = max(int(round(ARXIV["nodes"] * scale)), 100)
    e = max(int(round(ARXIV["edges"] * scale)), 100)
    rng = np.random.default_rng(seed)
    dst = rng.integers(0, n, e)
    src = (dst + rng.integers(1, n, e)) % n  # never the target itself
    near = rng.random(e) < locality
    window = max(n // 100, 1)
    offset = rng.integers(1, window + 1, int(near.sum())) * rng.choice([-1, 1], int(near.sum()))
    src[near] = (dst[near] + offset) % n
    x = rng.standard_normal((n, ARXIV["features"]), dtype=np.float32)
    y = rng.integers(0, ARXIV["classes"], n).astype(np.int32)
    name = f"arxiv x{scale:g}" + (f" local {locality:g}" if locality else "")
    return GraphData(name, x, sort_by_target(np.stack([src, dst])), y, ARXIV["classes"],
                     f"synthetic, ogbn-arxiv's shape x {scale:g} (seed {seed}, "
                     f"locality {locality:g})")


def builders(hidden: int) -> dict:
    return {fw: partial(build, hidden=hidden) for fw, build in BUILDERS.items()}


# ---------------------------------------------------------------- part 1: peers
def bench_peers(g: GraphData, kinds: list[str], cfg, *, hidden: int,
                max_row_s: float) -> list[dict]:
    results = []
    for kind in kinds:
        makers = {fw: partial(node_runner, fw, kind, g, builders(hidden),
                              torch_threads=cfg.torch_threads) for fw in cfg.frameworks}
        runners, timed = time_rows(makers, steps=cfg.steps, warmup=cfg.warmup,
                                   rounds=cfg.rounds, max_row_s=max_row_s)
        rows = summarise(runners, timed, breakdown=cfg.breakdown, label=f"{kind:4s}",
                         shape=g.name, model=kind)
        for row in rows:
            r = runners[row["framework"]]
            _, row["rss_delta"] = rss_peak_delta(lambda r=r: r.sync(r.step()))
            row["memory"] = r.memory() if row["framework"] in JAX else None
        results += rows
        del runners, timed
        gc.collect()
    return results


def _mb(v) -> str:
    return fmt(None if v is None else v / MB, ".0f")


def xla_total(memory: dict | None) -> int | None:
    """Arguments + outputs + temporaries - aliased outputs: every buffer the
    compiled step holds at once at most. (XLA's ``peak_memory_in_bytes`` is not
    used: on the CPU backend it came out below the temporaries alone.)"""
    if not memory or memory.get("arguments") is None:
        return None
    return (memory["arguments"] + memory["outputs"] + memory["temps"]
            - (memory.get("alias") or 0))


def print_memory_table(results: list[dict]) -> None:
    rows = [[r["model"], r["framework"], *(_mb((r["memory"] or {}).get(k)) for k in
                                          ("arguments", "outputs", "temps")),
             _mb(xla_total(r["memory"])), _mb(r["rss_delta"])] for r in results]
    print_table(["model", "framework", "XLA arguments MB", "XLA outputs MB", "XLA temps MB",
                 "XLA total MB", "RSS peak delta of a step MB"], rows,
                title="Memory of one training step (XLA: compiled.memory_analysis(), total = "
                      "arguments + outputs + temps - aliased; RSS: sampled every 0.5 ms "
                      "during a step, over the RSS before it: a lower bound)")


def _target(base: dict, ms: dict) -> str:
    """'yes' when gnncore's step is <= 0.5 of PyG's (--torch-threads), as printed."""
    if ms["pyg"] is None:
        return "-"
    return "yes" if float(f"{base['median_ms'] / ms['pyg']:.2f}") <= 0.5 else "no"


# ---------------------------------------------------------------- part 2: partitioned
def _child_env(parts: int, platform: str | None) -> dict:
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={parts}"])
    if platform:
        env["JAX_PLATFORMS"] = platform
    return env


def run_children(args) -> list[dict]:
    """One child process per device count; their reports in order."""
    reports = []
    for parts in args.parts:
        cmd = [sys.executable, "-m", "benchmarks.bench_scale", "--child", str(parts),
               "--scale", str(args.scale), "--locality", str(args.locality),
               "--seed", str(args.seed), "--hidden", str(args.hidden),
               "--models", ",".join(args.model_list), "--exchanges", ",".join(args.exchange_list),
               "--part-steps", str(args.part_steps), "--part-warmup", str(args.part_warmup),
               "--part-rounds", str(args.part_rounds)]
        if args.platform:
            cmd += ["--platform", args.platform]
        print(f"\n-- partitioned: {parts} device(s), child process", flush=True)
        proc = subprocess.run(cmd, env=_child_env(parts, args.platform), stdout=subprocess.PIPE,
                              text=True, timeout=args.child_timeout)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            print(f"   the child for {parts} device(s) failed (exit {proc.returncode})")
            reports.append({"parts": parts, "error": f"exit {proc.returncode}", "rows": []})
            continue
        reports.append(json.loads(lines[-1][len("RESULT "):]))
    return reports


def child_main(args) -> int:
    """Inside the child: time the partitioned steps on ``args.child`` devices."""
    import jax

    from gnncore import Graph
    from gnncore.partition import make_mesh, node_loss, partition_graph, shard_graph

    parts = args.child
    devices = jax.devices()
    report = {"parts": parts, "platform": devices[0].platform,
              "device_kind": devices[0].device_kind, "devices": len(devices), "rows": []}
    if len(devices) < parts:
        report["skipped"] = (f"{len(devices)} {devices[0].platform} device(s) present; forced "
                             "devices exist on the CPU platform only (--platform cpu)")
        print("RESULT " + json.dumps(report), flush=True)
        return 0
    log = partial(print, file=sys.stderr, flush=True)
    g = arxiv_like(args.scale, locality=args.locality, seed=args.seed)
    graph = Graph.from_arrays(g.edge_index, g.x, y=g.y)
    mesh = make_mesh(parts)
    for kind in args.model_list:
        makers, info = {}, {}

        def checked(make):
            """The runner after CHECK_STEPS steps (their losses kept; the first
            call, with its compile, timed)."""
            def build():
                r = make()
                t0 = time.perf_counter()
                r.check_losses = [r.loss_on(0)]
                r.first_s = time.perf_counter() - t0
                r.check_losses += [r.loss_on(0) for _ in range(CHECK_STEPS - 1)]
                return r
            return build

        if parts == 1:  # the reference: gnncore on the whole graph, one device
            makers["unpartitioned"] = checked(partial(
                node_runner, "gnncore", kind, g, {"gnncore": partial(build_gnncore,
                                                                     hidden=args.hidden)}))
        for exchange in args.exchange_list:
            t0 = time.perf_counter()
            host = partition_graph(graph, parts, exchange=exchange, gcn=kind == "gcn")
            if kind == "gcn":  # GCN layers read the normalised edges only
                host = host.replace(adj=None, edge_weight=None)
            pg = shard_graph(host, mesh)
            jax.block_until_ready(pg)
            received = ((parts - 1) * host.rows_per_part if exchange == "all_gather"
                        else (parts - 1) * host.halo_size)
            info[exchange] = {"partition_s": time.perf_counter() - t0,
                              "rows_per_part": host.rows_per_part,
                              "edges_per_part": host.edges_per_part,
                              "halo_size": host.halo_size,
                              "halo_rows": host.halo_rows, "received_rows": received}
            model = build_gnncore(kind, g, 0, hidden=args.hidden)
            makers[exchange] = checked(partial(
                JaxRunner, model, [pg], loss_fn=partial(node_loss, mesh=mesh, mask=None)))
            del host
        log(f"   {parts} device(s) {kind}: timing {', '.join(makers)}")
        runners, timed = time_rows(makers, steps=args.part_steps, warmup=args.part_warmup,
                                   rounds=args.part_rounds)
        for row in summarise(runners, timed, breakdown=False, label=f"{parts}x {kind}",
                             shape=g.name, model=kind):
            r = runners[row["framework"]]
            row.update(info.get(row["framework"], {}), exchange=row.pop("framework"),
                       first_s=r.first_s, compile_s=r.first_s - row["median_ms"] / 1e3,
                       check_losses=r.check_losses, memory=r.memory(),
                       times_ms=[1e3 * t for t in row.pop("times")])
            report["rows"].append(row)
        del runners, timed, makers
        gc.collect()
    print("RESULT " + json.dumps(report), flush=True)
    return 0


def print_partition_tables(reports: list[dict], peers: list[dict]) -> None:
    for rep in reports:
        if rep.get("skipped"):
            print(f"{rep['parts']} device(s): skipped -- {rep['skipped']}")
    rows_by = {(rep["parts"], r["model"], r["exchange"]): r
               for rep in reports for r in rep.get("rows", [])}
    if not rows_by:
        return
    kinds = sorted({k[1] for k in rows_by}, key=MODELS.index)
    ref = {kind: rows_by.get((1, kind, "unpartitioned")) for kind in kinds}
    rows = []
    for (parts, kind, exchange), r in rows_by.items():
        one = rows_by.get((1, kind, exchange)) or ref[kind]
        base = ref[kind]
        diff = (None if base is None else
                max(abs(a - b) for a, b in zip(r["check_losses"], base["check_losses"])))
        mem = r["memory"]
        rows.append([kind, parts, exchange, r.get("rows_per_part", "-"),
                     r.get("received_rows", "-"), fmt(r.get("partition_s"), ".1f"),
                     f"{r['compile_s']:.1f}", f"{r['median_ms']:.0f}", f"{r['min_ms']:.0f}",
                     fmt(None if one is None else r["median_ms"] / one["median_ms"], ".2f"),
                     _mb(mem["arguments"]), _mb(mem["temps"]), _mb(xla_total(mem)),
                     fmt(diff, ".1e")])
    rows.sort(key=lambda row: (MODELS.index(row[0]), row[1], row[2] != "unpartitioned",
                               row[2]))
    print_table(["model", "devices", "exchange", "rows/device", "rows received/device/layer",
                 "partition s", "compile s", "median step ms", "min step ms",
                 "vs 1 device", "XLA args MB/device", "XLA temps MB/device",
                 "XLA total MB/device", f"max |loss - 1 device| ({CHECK_STEPS} steps)"], rows,
                title="Partitioned training step (gnncore.partition), per device count")
    kinds_ok = []
    for kind in kinds:
        base = ref[kind]
        if base is None:
            continue
        diffs = [max(abs(a - b) for a, b in zip(r["check_losses"], base["check_losses"]))
                 for (p, k, _), r in rows_by.items() if k == kind]
        kinds_ok.append(f"{kind}: max |loss diff| {max(diffs):.1e} over "
                        f"{len(diffs)} runs x {CHECK_STEPS} steps")
        peer = next((p for p in peers if p["model"] == kind and p["framework"] == "gnncore"),
                    None)
        if peer is not None:
            kinds_ok.append(f"{kind}: first-step loss unpartitioned in the peers' run "
                            f"{peer['loss0']:.6f}, in the 1-device child "
                            f"{base['check_losses'][0]:.6f}")
    print("correctness: " + ("; ".join(kinds_ok) or "no 1-device run to compare with "
                                                     "(add 1 to --parts)"))
    print("note: forced CPU devices share the same cores (XLA_FLAGS="
          "--xla_force_host_platform_device_count=N), so more devices measure the overhead "
          "of partitioning and exchanging, not a speed-up.")


# ---------------------------------------------------------------- main
def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_step_options(p, quick_help="same as --steps 5 --warmup 1 --rounds 1")
    p.set_defaults(steps=None, warmup=None, rounds=None, no_breakdown=True)
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply ogbn-arxiv's node and edge counts (e.g. 0.1)")
    p.add_argument("--locality", type=float, default=0.0,
                   help="share of edges from a nearby node id (0: uniform random edges)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hidden", type=int, default=128, help="hidden width (128)")
    p.add_argument("--models", default=",".join(MODELS), help="comma list: gcn,sage")
    p.add_argument("--max-row-s", type=float, default=60.0,
                   help="timed seconds per peer row before it stops early (60)")
    p.add_argument("--parts", default="1,2,4",
                   help="device counts for the partitioned part ('' to skip it)")
    p.add_argument("--exchanges", default=",".join(EXCHANGES), help="all_gather,halo")
    p.add_argument("--part-steps", type=int, default=6, help="timed steps per partitioned row")
    p.add_argument("--part-warmup", type=int, default=1)
    p.add_argument("--part-rounds", type=int, default=2)
    p.add_argument("--no-peers", action="store_true", help="skip the peer comparison")
    p.add_argument("--platform", default=None,
                   help="JAX_PLATFORMS for this run and the children (cpu, cuda, ...); "
                        "default: whatever jax.devices() gives")
    p.add_argument("--child-timeout", type=float, default=1800.0)
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps is None:
        args.steps = 5 if args.quick else 10
    if args.warmup is None:
        args.warmup = 1 if args.quick else 2
    if args.rounds is None:
        args.rounds = 1 if args.quick else 2
    args.model_list = [m for m in args.models.split(",") if m]
    args.exchange_list = [x for x in args.exchanges.split(",") if x]
    args.parts = [int(n) for n in str(args.parts).split(",") if n]
    for m in args.model_list:
        if m not in MODELS:
            p.error(f"unknown model {m!r}")
    for x in args.exchange_list:
        if x not in EXCHANGES:
            p.error(f"unknown exchange {x!r}")
    if args.scale <= 0:
        p.error("--scale must be positive")
    return p, args


def main(argv=None) -> int:
    p, args = parse(argv)
    if args.platform:
        os.environ["JAX_PLATFORMS"] = args.platform
    if args.child is not None:
        return child_main(args)
    t_start = time.perf_counter()
    cfg = step_settings(p, args)
    info, vers = print_machine()
    import jax

    dev = jax.devices()[0]
    print(f"jax devices: {len(jax.devices())} x {dev.platform} ({dev.device_kind})"
          + ("" if dev.platform == "cpu" else "; PyG runs on the CPU (torch CPU build)"))
    t0 = time.perf_counter()
    g = arxiv_like(args.scale, locality=args.locality, seed=args.seed)
    print(f"graph {g.name}: {g.num_nodes} nodes, {g.num_edges} edges, {g.num_features} "
          f"features, {g.num_classes} classes -- {g.source}; generated in "
          f"{time.perf_counter() - t0:.1f} s")
    print(f"models: 2 layers, hidden {args.hidden}, dropout 0, Adam lr 0.01, loss over all "
          f"nodes; peers: {cfg.steps} timed steps in {cfg.rounds} rounds after "
          f"{cfg.warmup} warm-up")
    peers = []
    if not args.no_peers and cfg.frameworks:
        start_backends(cfg.frameworks, cfg.torch_threads)
        peers = bench_peers(g, args.model_list, cfg, hidden=args.hidden,
                            max_row_s=args.max_row_s)
        print_step_table(peers, title="Training step (forward + backward + Adam), full batch",
                         n_column=True)
        print_memory_table(peers)
        print_ratio_table(peers, [g], args.model_list, target=_target,
                          target_header="target met (gnncore/PyG <= 0.5)",
                          title="Ratios (median step time; < 1 means gnncore is faster)")
    del g
    gc.collect()
    reports = run_children(args) if args.parts else []
    print_partition_tables(reports, peers)
    print(f"\ntotal wall time {time.perf_counter() - t_start:.0f} s; "
          f"load average now {load_average()}")
    if args.json:
        write_json(args.json, {"machine": info, "versions": vers, "args": {
            k: v for k, v in vars(args).items() if k != "json"}, "results": peers,
            "partitioned": reports})
    return 0


if __name__ == "__main__":
    sys.exit(main())
