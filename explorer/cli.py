"""Command line: ``python -m explorer train|compare|audit|export|inspect|check``.

``train`` runs one configuration and ends with a ``verdict:`` line (exit 0,
frozen or not); ``audit`` is the same but exits 1 on a frozen verdict, for CI
scripts; ``compare`` runs the configuration in every JIT mode from the same
initial weights and prints one row per mode; ``export --output PATH`` writes
the configuration as a standalone training script (same flags as ``train``);
``inspect PATH`` summarises a graph file; ``check SCRIPT [ARGS…]`` runs your own
training script and judges its jitted steps (:mod:`explorer.check`). Bad
arguments and bad files exit 2 with a one-line message.

JAX, Flax and optax load with the first command that needs them (train,
compare, export, check), not for ``--help``, a usage error or ``inspect``
(:mod:`explorer.lazy`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from explorer.config import ConfigError, LayerConfig, RunConfig
from explorer.engine import STEPPERS, task_for
from explorer.engine.optimizers import OPTIMIZERS
from explorer.graphio import GraphFileError, load_graph_file
from explorer.lazy import lazy, when_loaded
from explorer.sources import FEATURES, GRAPH_TASKS, PRESETS
from explorer.startup import without_ipython
from gnncore import NORMS, POOLS

if TYPE_CHECKING:
    from explorer.engine import Run

engine_run = lazy("explorer.engine.run")
export = lazy("explorer.export")
racing = lazy("explorer.race")

MAX_CONFIG_BYTES = 64 * 1024


class UsageError(Exception):
    pass


def _import_flax() -> None:
    """Flax first, with IPython hidden (explorer/startup.py): run once, when the
    first command that needs JAX loads it."""
    with without_ipython():
        import flax.nnx  # noqa: F401


when_loaded(_import_flax)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage too)
        raise UsageError(message)


def _layers(text: str) -> tuple[LayerConfig, ...]:
    """``gcn:16,gat:8:h4`` → layer configs (:meth:`LayerConfig.parse_stack`
    with ``:``; a kind alone is 16 wide)."""
    try:
        return LayerConfig.parse_stack(text, ":", default_width=16)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(err.message) from None


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m explorer", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, help_text in (("train", "train one configuration"),
                            ("audit", "train, then exit 1 if the verdict is frozen"),
                            ("compare", "the same configuration in every JIT mode"),
                            ("export", "write the configuration as a standalone script")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--config", type=Path, help="a saved RunConfig JSON file")
        p.add_argument("--graph", choices=sorted(PRESETS) + sorted(GRAPH_TASKS),
                       help="a preset graph, or a graph-classification dataset")
        p.add_argument("--difficulty", type=float, help="0 (easy) to 1, synthetic presets")
        p.add_argument("--features", choices=FEATURES,
                       help="node features (default: the preset's own: 'file' for cora and "
                            "citeseer, 'one_hot' otherwise)")
        p.add_argument("--mode", choices=list(STEPPERS))
        p.add_argument("--epochs", type=int)
        p.add_argument("--seed", type=int)
        p.add_argument("--layers", type=_layers, help="e.g. gcn:16,gat:8")
        p.add_argument("--optimizer", choices=tuple(OPTIMIZERS))
        p.add_argument("--lr", dest="learning_rate", type=float)
        p.add_argument("--weight-decay", type=float)
        p.add_argument("--dropout", type=float)
        p.add_argument("--batch-norm", action=argparse.BooleanOptionalAction, default=None)
        p.add_argument("--norm", choices=tuple(NORMS))
        p.add_argument("--pool", choices=tuple(POOLS),
                       help="readout of a graph-classification dataset")
        p.add_argument("--bucket-padding", action=argparse.BooleanOptionalAction,
                       default=None)
        p.add_argument("--scan-steps", type=int,
                       help="training steps per compiled call in the scan mode (its K)")
        p.add_argument("--devices", type=int,
                       help="train on the first N devices (on CPU: set XLA_FLAGS="
                            "--xla_force_host_platform_device_count=N before starting)")
        p.add_argument("--every", type=int, default=10, help="print every N steps")
        if name == "export":
            p.add_argument("--output", type=Path, required=True,
                           help="where to write the script (.py)")
            p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p = sub.add_parser("inspect", help="read a graph file and summarise it")
    p.add_argument("path", type=Path)
    p.add_argument("--nodes", type=Path, help="optional node CSV (id,label,feature...)")
    # listed for --help; explorer.check parses its own arguments (see main)
    sub.add_parser("check", help="run your training script and judge its jitted steps: "
                                 "check SCRIPT [--every N] [--log DIR] [ARGS...]")
    return parser


def _inspect(args, out) -> int:
    try:
        node_csv = None if args.nodes is None else args.nodes.read_bytes()
        graph = load_graph_file(args.path, node_csv=node_csv)
    except OSError as err:
        print(f"error: cannot read {args.nodes}: {err.strerror}", file=sys.stderr)
        return 2
    except GraphFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    labels = graph.labels
    classes = 0 if labels is None else len(set(labels[labels >= 0].tolist()))
    print(f"nodes: {graph.num_nodes}", file=out)
    print(f"edges: {graph.edge_index.shape[1]}" + ("" if graph.directed else " (undirected)"),
          file=out)
    print(f"features: {0 if graph.features is None else graph.features.shape[1]}", file=out)
    print(f"labels: {classes}", file=out)
    if graph.split is not None:
        sizes = [int(mask.sum()) for mask in graph.split]
        print(f"split: {sizes[0]} train / {sizes[1]} val / {sizes[2]} test", file=out)
    for warning in graph.warnings:
        print(f"warning: {warning}", file=out)
    return 0


def _config(args) -> RunConfig | None:
    if args.command == "inspect":
        return None
    config, from_file = RunConfig(), {}
    if args.config is not None:
        try:
            if args.config.stat().st_size > MAX_CONFIG_BYTES:
                raise UsageError(f"{args.config}: config file larger than 64 KiB")
            text = args.config.read_text(encoding="utf-8")
            config = RunConfig.from_json(text)
            from_file = json.loads(text)  # valid: from_json accepted it
        except OSError as err:
            raise UsageError(f"cannot read {args.config}: {err.strerror}") from None
        except UnicodeDecodeError:
            raise UsageError(f"{args.config}: not UTF-8 text") from None
    changes = {name: getattr(args, name) for name in
               ("graph", "difficulty", "features", "mode", "epochs", "seed", "layers",
                "optimizer", "learning_rate", "weight_decay", "dropout", "batch_norm",
                "bucket_padding", "norm", "pool", "scan_steps", "devices")
               if getattr(args, name) is not None}
    graph = changes.get("graph", config.graph)
    usable = task_for(graph).usable_features(config.features)
    if "features" not in changes and usable != config.features:
        changes["features"] = usable  # node ids mean nothing across graphs
    if graph in PRESETS and "features" not in changes and "features" not in from_file:
        changes["features"] = PRESETS[graph].default_features  # cora: its word features
    return RunConfig.from_dict({**config.to_dict(), **_plain(changes)})


def _plain(changes: dict) -> dict:
    if "layers" in changes:
        changes["layers"] = [{"kind": la.kind, "width": la.width, "options": {}}
                             for la in changes["layers"]]
    return changes


def _train(run: Run, every: int, out) -> Run:
    config = run.config
    print(f"mode {config.mode} | graph {config.graph} | {config.epochs} steps | seed "
          f"{config.seed}", file=out)
    if run.mesh is not None:
        split = sum(1 for r in run.layout() if "data" in r["spec"])
        print(f"devices {config.devices}: mesh axis 'data' over "
              + ", ".join(str(d) for d in run.mesh.devices.flat)
              + f"; {split} arrays split along it, the model copied to each", file=out)
    print(f"{'step':>6} {'loss':>10} {'train':>6} {'val':>6} {'test':>6} {'ms':>9} traced",
          file=out)
    try:
        while len(run.history) < config.epochs:  # a call: one step, or K in scan mode
            for r in run.advance(config.epochs - len(run.history)):
                if r.step == 1 or r.step % max(every, 1) == 0 or r.step == config.epochs:
                    print(f"{r.step:>6} {r.loss:>10.6f} {r.train_acc:>6.2f} {r.val_acc:>6.2f} "
                          f"{r.test_acc:>6.2f} {1e3 * r.wall_s:>9.2f} "
                          f"{'yes: ' + r.trace_cause if r.traced else ''}", file=out)
    except engine_run.TrainingStopped as err:
        print(f"stopped: {err}", file=out)
    return run


def _mb(value) -> str:
    return "n/a" if value is None else f"{value / 2**20:.3f}"


def _compare(config: RunConfig, out) -> None:
    entries = racing.race(config)  # same seed: same initial weights in every mode
    w = max(20, *(len(e.label) + 1 for e in entries))
    print(f"{'mode':<{w}} {'trace+lower s':>13} {'compile s':>9} {'first call s':>12} "
          f"{'median step ms':>14} {'peak MB':>8} {'donated MB':>10} {'final loss':>11} "
          f"{'params changed':>14}  verdict", file=out)
    notes = {}
    for e in entries:
        if e.stopped:
            print(f"{e.label:<{w}} stopped: {e.stopped}", file=out)
            continue
        print(f"{e.label:<{w}} {e.trace_lower_s:>13.3f} {e.compile_s:>9.3f} "
              f"{e.first_call_s:>12.3f} {e.median_step_ms:>14.3f} {_mb(e.peak_bytes):>8} "
              f"{_mb(e.donation_saves_bytes):>10} {e.losses[-1]:>11.6f} "
              f"{e.params_changed:>6} of {e.params_total:<5}  {e.verdict}", file=out)
        if e.donation_note:
            notes.setdefault(e.donation_note, []).append(e.label)
    print("peak MB: XLA's peak memory of one compiled call; donated MB: what donating the "
          "state (donate_argnums=(0,)) saves of that peak", file=out)
    for note, modes in notes.items():
        print(f"donated MB of {', '.join(modes)}: {note}", file=out)


def _export(config: RunConfig, path: Path, force: bool, out) -> int:
    try:
        text = export.script_for(config)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if path.is_dir():
        print(f"error: {path} is a directory", file=sys.stderr)
        return 2
    try:
        with open(path, "w" if force else "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        print(f"error: {path} exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: cannot write {path}: {err.strerror}", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parents[1]  # the folder holding gnncore/
    where = "" if path.resolve().parent == root else f"PYTHONPATH={root} "
    print(f"wrote {path} ({text.count(chr(10))} lines): {config.mode} mode on "
          f"{config.graph}, {config.epochs} steps", file=out)
    print(f"run it: {where}python {path} [--steps N]", file=out)
    return 0


def main(argv=None, out=None) -> int:
    out = out or sys.stdout
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["check"]:  # its own parser: everything after the script is the script's
        import explorer.jax_first  # noqa: F401  (gnncore's flags, then Flax without IPython)
        from explorer.check import main as check

        return check(argv[1:], out)
    try:
        args = _parser().parse_args(argv)
        config = _config(args)
    except (UsageError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.command == "inspect":
        return _inspect(args, out)
    if args.command == "export":
        return _export(config, args.output, args.force, out)
    try:  # loading the graph can refuse the config, e.g. features 'file' on karate
        if args.command == "compare":
            _compare(config, out)
            return 0
        run = engine_run.Run(config)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    run = _train(run, args.every, out)
    report = run.audit()
    print(report.verdict.line(), file=out)
    if report.verdict.status == "frozen":
        print(f"cause: {report.verdict.cause}", file=out)
        print(f"fix: {report.verdict.fix}", file=out)
        return 1 if args.command == "audit" else 0
    return 0
