"""Exported scripts (explorer.export, ``python -m explorer export``) run on their
own and print the engine's per-step losses.

Every script runs in its own subprocess whose path holds gnncore but not
explorer. To keep the file fast, all the scripts start together (one module
fixture) and the engine runs they are compared with happen in this process
while they work.
"""

import ast
import inspect
import io
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

from explorer import export
from explorer.cli import main
from explorer.config import LayerConfig, RunConfig
from explorer.drawing import Drawing
from explorer.engine import STEPPERS, Run, steppers
from explorer.engine.tasks import NodeTask
from explorer.export import script_for
from explorer.graphio import load_graph_file
from gnncore import Graph, SparseFeatures

STEPS = 3
ALLOWED = {"jax", "flax", "optax", "gnncore"}
#: the CLI case doubles as the jax.jit one: frozen training, run with ``--steps 2``
CLI_FLAGS = ["--graph", "sbm", "--difficulty", "0.3", "--mode", "jax.jit", "--epochs", str(STEPS),
             "--seed", "2", "--layers", "sage:8,gcn:4", "--optimizer", "adamw", "--every", "1"]

EDGES_CSV = b"""source,target,weight
ann,bob,1.5
bob,cid,0.25
cid,ann,2
cid,dan,1
dan,eve,0.75
eve,fay,1
fay,dan,3.125
"""
NODES_CSV = b"""id,label,f1,f2,f3
ann,0,0.1,-1.25,3
bob,0,0.3,2.5e-3,-0.7
cid,,1.1,0.2,0.333
dan,1,-0.05,7,0.9
eve,1,2.2,-3.3,0.01
fay,1,0.6,0.4,-1e-4
"""


def drawn_graph(config: RunConfig) -> Graph:
    """Two triangles joined by a path, drawn node by node (one node unlabelled)."""
    drawing = Drawing()
    for label in (0, 0, 0, 0, 1, 1, 1, 1, -1):
        drawing = drawing.add_node(label=label)
    for u, v in ((0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 5), (5, 6), (6, 4), (6, 7),
                 (7, 8)):
        drawing = drawing.add_edge(u, v)
    return drawing.to_graph(features="degree_one_hot", seed=config.seed, train_per_class=2)


def uploaded_graph(config: RunConfig) -> Graph:
    """A weighted edge CSV with a node CSV (labels, float features), read by the
    upload's loader."""
    gf = load_graph_file("upload.csv", EDGES_CSV, node_csv=NODES_CSV)
    return gf.to_graph(features="file", seed=config.seed, train_per_class=1)


#: name -> (config, graph builder or None, LITERAL_LIMIT override or None, script args)
CASES = {
    # one layer: eager mode compiles every operation once, so fewer is faster
    "eager_drawn": (RunConfig(mode="eager", optimizer="sgd", learning_rate=0.5, epochs=5,
                              layers=(LayerConfig("gcn", 2),)),
                    drawn_graph, None, ["--steps", str(STEPS)]),
    "nnx_uploaded_gat": (RunConfig(mode="nnx.jit", epochs=STEPS, seed=1, layers=(
        LayerConfig("gat", 8, {"heads": 2}), LayerConfig("gcn", 4))), uploaded_graph, None, []),
    "functional_padded": (RunConfig(mode="functional", graph="les_miserables",
                                    features="gaussian", bucket_padding=True, epochs=STEPS),
                          None, None, []),
    # every array above 8 elements embedded compressed
    "cached_bn_compact": (RunConfig(mode="cached_partial", features="laplacian", dropout=0.5,
                                    batch_norm=True, bucket_padding=True, epochs=STEPS),
                          None, 8, []),
    # Cora's word features: the script, like the engine, gives them to the step as CSR
    "tree_mode_cora": (RunConfig(mode="nnx.jit(graph=False)", graph="cora", features="file",
                                 dropout=0.5, epochs=STEPS, layers=(LayerConfig("gcn", 4),)),
                       None, None, []),
    # K=2 over 3 steps: a call of 2, then a shorter one of 1 (both in the engine and the
    # script); batch norm and dropout: each step's eval-mode accuracies come from the scan
    "scan_bn": (RunConfig(mode="scan", scan_steps=2, dropout=0.5, batch_norm=True,
                          optimizer="sgd", learning_rate=0.05, epochs=STEPS,
                          layers=(LayerConfig("gcn", 8), LayerConfig("gcn", 4))),
                None, None, []),
    "graph_task": (RunConfig(graph="triangle", features="degree_one_hot", batch_norm=True,
                             norm="graph", pool="sum", epochs=STEPS), None, None, []),
}


def step_rows(text: str) -> list[list[str]]:
    """The step, loss and accuracy columns of every step row."""
    return [line.split()[:5] for line in text.splitlines()
            if line.split() and line.split()[0].isdigit()]


def engine_rows(run: Run, steps: int) -> list[list[str]]:
    return [f"{r.step} {r.loss:.6f} {r.train_acc:.2f} {r.val_acc:.2f} {r.test_acc:.2f}".split()
            for r in run.train(steps)]


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    """Export every case (and the CLI's), start all the scripts, and hand back
    ``{name: (config, graph, text, process)}``."""
    root = tmp_path_factory.mktemp("export")
    lib = root / "lib"  # gnncore only: a script importing explorer would fail
    lib.mkdir()
    (lib / "gnncore").symlink_to(REPO / "gnncore", target_is_directory=True)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(lib)}
    out = {}
    for name, (config, make_graph, limit, argv) in CASES.items():
        graph = make_graph(config) if make_graph else None
        with pytest.MonkeyPatch.context() as mp:
            if limit is not None:
                mp.setattr(export, "LITERAL_LIMIT", limit)
            text = script_for(config, graph)
        path = root / f"{name}.py"
        path.write_text(text, encoding="utf-8")
        out[name] = (config, graph, text, path, argv)
    cli_path = root / "cli_export.py"
    buf = io.StringIO()
    assert main(["export", *CLI_FLAGS, "--output", str(cli_path)], out=buf) == 0
    out["cli"] = (None, None, cli_path.read_text(encoding="utf-8"), cli_path, ["--steps", "2"])
    procs = {}
    for name, (*_, path, argv) in out.items():
        procs[name] = subprocess.Popen([sys.executable, str(path), *argv], cwd=root, env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
    results = {}

    def result(name):
        if name not in results:
            stdout, stderr = procs[name].communicate(timeout=300)
            assert procs[name].returncode == 0, stderr[-3000:]
            results[name] = stdout
        return results[name]

    yield {name: (*item[:3], result) for name, item in out.items()}
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("name", list(CASES))
def test_script_prints_the_engines_losses(scripts, name):
    config, graph, _, result = scripts[name]
    run = Run(config, graph)
    expected = engine_rows(run, STEPS)
    text = result(name)
    rows = step_rows(text)
    assert rows == expected
    for got, want in zip(rows, expected):
        assert abs(float(got[1]) - float(want[1])) <= 1e-6
    changes = [c for c in run.audit().changes if c.kind == "parameter"]
    changed = sum(c.changed for c in changes)
    assert f"parameters changed: {changed} of {len(changes)}" in text
    lines = text.splitlines()
    assert lines[0] == (f"mode {config.mode} | graph {graph and 'custom' or config.graph} | "
                        f"{STEPS} steps | seed {config.seed}")


def test_scripts_give_the_step_its_features_as_the_engine_does(scripts):
    # CSR for Cora's words (the engine's own rule, called in the script); dense with
    # bucket padding, where the number of non-zeros would change the shapes
    config, _, text, _ = scripts["tree_mode_cora"]
    assert isinstance(NodeTask.load(config).inputs.x, SparseFeatures)
    assert "features = sparse_if_mostly_zero(graph.x)" in text
    assert "features = padded.x" in scripts["functional_padded"][2]
    assert not isinstance(NodeTask.load(scripts["functional_padded"][0]).inputs.x,
                          SparseFeatures)


def test_a_multi_head_script_builds_the_head_blocks_as_the_engine_does(scripts):
    config, graph, text, _ = scripts["nnx_uploaded_gat"]
    assert Run(config, graph).inputs.adj.heads == (2,)
    assert "inputs = dataclasses.replace(inputs, adj=inputs.adj.for_model(model))" in text
    assert "for_model" not in scripts["functional_padded"][2]  # GCN: no heads


def test_every_mode_is_covered():
    modes = {c.mode for c, *_ in CASES.values()} | {"jax.jit"}  # jax.jit: the CLI case
    assert "jax.jit" in CLI_FLAGS and modes == set(STEPPERS)


def test_jax_jit_script_shows_frozen_training(scripts):
    text = scripts["cli"][3]("cli")
    rows = step_rows(text)
    assert len(rows) == 2 and rows[0][1] == rows[1][1]  # --steps 2; the loss never moves
    assert "parameters changed: 0 of " in text and "frozen:" in text
    script = scripts["cli"][2]
    assert "jitted_step = jax.jit(train_step)" in script
    fix = script.split("THE PITFALL")[1].split("jitted_step = jax.jit")[0]
    assert "nothing\n# flows back out" in fix and "nnx.jit(train_step)" in fix


def test_each_script_writes_out_only_its_mode(scripts):
    markers = {"nnx.jit": "jitted_step = nnx.jit(train_step)",
               "jax.jit": "jitted_step = jax.jit(train_step)",
               "cached_partial": "nnx.cached_partial(",
               "functional": "functional_step = make_functional_step(train_step, graphdef)",
               "nnx.jit(graph=False)": "jitted_step = nnx.jit(train_step, graph=False)",
               "scan": "scan_step = make_scan_step(train_step, graphdef, measure)"}
    for name, (config, _, text, _) in scripts.items():
        config = config or RunConfig(mode="jax.jit")  # the CLI case
        code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        for mode, marker in markers.items():
            assert (marker in code) is (mode == config.mode), (name, mode)
    functional = scripts["functional_padded"][2]
    for call in ("nnx.merge(graphdef, state)", "return nnx.state((model, optimizer)), loss",
                 "nnx.update((model, optimizer), state)"):
        assert call in functional
    scan = scripts["scan_bn"][2]  # the engine's own scan step and measure, as they are
    for source in (inspect.getsource(steppers.make_scan_step),
                   inspect.getsource(steppers.make_eval_measure)):
        assert source in scan
    assert "SCAN_STEPS = 2  # training steps per compiled call" in scan
    assert "scan_step(state, inputs, targets, steps=steps)" in scan
    assert "nnx.update((model, optimizer), state)" in scan


def test_header_and_data_are_readable(scripts):
    text = scripts["eager_drawn"][2]
    doc = ast.get_docstring(ast.parse(text))
    for words in ("eager mode", "'custom'", "layers:   gcn:2", "seed:     0",
                  "python this_script.py", "--steps"):
        assert words in doc
    assert "EDGES = [" in text and "LABELS = [0, 0, 0, 0, 1, 1, 1, 1, -1]" in text
    assert "unpack(" not in text and "base64" not in text
    assert "FEATURES = jnp.eye(NUM_NODES" in scripts["cli"][2]  # one-hot ids
    compact = scripts["cached_bn_compact"][2]
    assert "import base64" in compact and "FEATURES = unpack(" in compact
    assert "bucket_size(graph.num_nodes + 1)" in compact


def test_scripts_import_only_stdlib_jax_flax_optax_gnncore(scripts):
    for name, (_, _, text, _) in scripts.items():
        tree = ast.parse(text)
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0
                modules.add(node.module.split(".")[0])
        outside = {m for m in modules if m not in ALLOWED and m not in sys.stdlib_module_names}
        assert not outside, (name, outside)
        assert "__import__" not in text and "importlib" not in text


def test_float32_literals_read_back_bit_exactly():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    values = np.concatenate([values[np.isfinite(values)],
                             np.float32([0.0, -0.0, 1e-45, 3.4028235e38, 2**23 + 1, 0.1])])
    texts = export._float_texts(values)
    back = np.asarray([float(t) for t in texts]).astype(np.float32)
    np.testing.assert_array_equal(back.view(np.uint32), values.view(np.uint32))
    assert texts[-6:] == ["0", "-0.0", "1e-45", "3.4028235e+38", "8388609", "0.1"]


def test_refusals(monkeypatch):
    with pytest.raises(ValueError, match="graph-classification dataset"):
        script_for(RunConfig(graph="triangle", features="degree"),
                   Graph.from_arrays([[0], [1]], [[1.0], [2.0]]))
    with pytest.raises(ValueError, match="labels"):
        script_for(RunConfig(), Graph.from_arrays([[0], [1]], [[1.0], [2.0]]))
    monkeypatch.setattr(export, "MAX_SCRIPT_BYTES", 5_000)
    with pytest.raises(ValueError, match=r"MB limit: the graph is too big"):
        script_for(RunConfig(graph="les_miserables"))


# ---------------------------------------------------------------------- CLI
def test_cli_export_runs_like_cli_train(scripts):
    buf = io.StringIO()
    assert main(["train", *CLI_FLAGS], out=buf) == 0
    trained = step_rows(buf.getvalue())
    assert len(trained) == STEPS and "verdict: frozen" in buf.getvalue()
    assert step_rows(scripts["cli"][3]("cli")) == trained[:2]  # run with --steps 2


def test_cli_export_writes_refuses_to_overwrite_and_forces(tmp_path, capsys):
    path = tmp_path / "run.py"
    argv = ["export", "--mode", "jax.jit", "--epochs", "2", "--output", str(path)]
    buf = io.StringIO()
    assert main(argv, out=buf) == 0
    assert f"wrote {path}" in buf.getvalue() and f"python {path}" in buf.getvalue()
    assert path.read_text().startswith("#!/usr/bin/env python3")
    path.write_text("mine")
    assert main(argv, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists; pass --force" in err
    assert path.read_text() == "mine"
    assert main([*argv, "--force"], out=io.StringIO()) == 0
    assert "jax.jit(train_step)" in path.read_text()


@pytest.mark.parametrize("argv, message", [
    (["export", "--mode", "jit", "--output", "x.py"], "invalid choice: 'jit'"),
    (["export", "--epochs", "0", "--output", "x.py"], "config field 'epochs'"),
    (["export", "--graph", "karate"], "required: --output"),
    (["export", "--output", "/nonexistent/dir/x.py"], "cannot write /nonexistent/dir/x.py"),
])
def test_cli_export_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    assert main(argv, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_cli_export_to_a_directory_exits_2(tmp_path, capsys):
    assert main(["export", "--output", str(tmp_path), "--force"], out=io.StringIO()) == 2
    assert "is a directory" in capsys.readouterr().err


def test_a_mode_with_its_own_loop_gets_no_unused_accuracy_helper():
    from explorer.export import script_for

    scan = script_for(RunConfig(mode="scan"))
    assert "evaluate_jitted" not in scan and "\ndef accuracies(" not in scan
    assert "\ndef accuracies(" in script_for(RunConfig(mode="functional"))
