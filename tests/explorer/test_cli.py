"""`python -m explorer`: the verdict line and exit codes."""

import io
import json
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

from explorer.cli import main


def run_cli(*argv):
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_train_prints_steps_and_a_training_verdict():
    code, text = run_cli("train", "--graph", "karate", "--mode", "functional", "--epochs", "4",
                         "--seed", "1", "--every", "2")
    lines = text.strip().splitlines()
    assert code == 0
    assert lines[-1].startswith("verdict: training: 4 of 4 parameters changed")
    assert "yes: first call" in text and lines[0].startswith("mode functional")


def test_frozen_run_exits_0_for_train_and_1_for_audit():
    code, text = run_cli("train", "--mode", "jax.jit", "--epochs", "3")
    assert code == 0 and "verdict: frozen: 0 of 4 parameters changed" in text
    assert "cause: the training step mutates NNX modules inside plain jax.jit" in text
    code, _ = run_cli("audit", "--mode", "jax.jit", "--epochs", "3")
    assert code == 1
    code, _ = run_cli("audit", "--mode", "nnx.jit", "--epochs", "3")
    assert code == 0


def test_config_file_and_flag_override(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"mode": "jax.jit", "epochs": 2, "layers": [
        {"kind": "sage", "width": 8}, {"kind": "gcn", "width": 4}]}))
    code, text = run_cli("train", "--config", str(path), "--mode", "nnx.jit")
    assert code == 0 and "mode nnx.jit" in text and "verdict: training" in text


@pytest.mark.parametrize("argv, message", [
    (["train", "--mode", "jit"], "invalid choice: 'jit'"),
    (["train", "--epochs", "0"], "config field 'epochs'"),
    (["train", "--layers", "gcn:x"], "bad layer 'gcn:x'"),
    (["train", "--config", "/nonexistent.json"], "cannot read /nonexistent.json"),
    (["fly"], "invalid choice: 'fly'"),
])
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    assert main(argv, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_compare_one_row_per_mode():
    code, text = run_cli("compare", "--epochs", "3", "--scan-steps", "2")
    lines = text.strip().splitlines()
    header, rows, notes = lines[0], lines[1:8], lines[8:]
    assert code == 0 and [r.split()[0] for r in rows] == [
        "eager", "nnx.jit", "jax.jit", "functional", "cached_partial", "nnx.jit(graph=False)",
        "scan"]
    verdicts = {r.split()[0]: r.split()[-1] for r in rows}
    assert verdicts["jax.jit"] == "frozen"
    assert all(v == "training" for m, v in verdicts.items() if m != "jax.jit")
    # memory: XLA's peak of one call, and what donating the state saves of it
    assert "peak MB" in header and "donated MB" in header
    columns = {r.split()[0]: r.split()[5:7] for r in rows}
    assert columns["eager"] == ["n/a", "n/a"]
    for mode in ("nnx.jit", "jax.jit", "cached_partial", "functional", "scan"):
        assert float(columns[mode][0]) > 0
    assert float(columns["functional"][1]) > 0 and float(columns["scan"][1]) > 0
    assert columns["nnx.jit"][1] == columns["jax.jit"][1] == "n/a"
    assert any(n.startswith("donated MB of jax.jit: n/a: the step returns no new state")
               for n in notes)
    assert any(n.startswith("donated MB of nnx.jit, cached_partial, nnx.jit(graph=False): "
                            "n/a") for n in notes)


def test_train_in_scan_mode_prints_every_step_and_why_each_call_traced():
    code, text = run_cli("train", "--mode", "scan", "--scan-steps", "3", "--epochs", "4",
                         "--every", "1")
    rows = [ln.split() for ln in text.splitlines() if ln.split() and ln.split()[0].isdigit()]
    assert code == 0 and [r[0] for r in rows] == ["1", "2", "3", "4"]
    assert "yes: first call" in text and "yes: a new scan length: 1 step in this call" in text
    assert text.strip().splitlines()[-1].startswith("verdict: training")
    code, _ = run_cli("train", "--mode", "scan", "--scan-steps", "0")
    assert code == 2


def test_module_entry_point_runs_as_a_subprocess():
    result = subprocess.run([sys.executable, "-m", "explorer", "audit", "--mode", "jax.jit",
                             "--epochs", "2"], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1
    assert result.stdout.strip().splitlines()[-3].startswith("verdict: frozen")


def test_help_usage_errors_and_inspect_load_no_jax_and_train_loads_it(tmp_path):
    path = tmp_path / "g.edgelist"
    path.write_text("a b\nb c\n")
    probe = textwrap.dedent(f"""
        import contextlib, io, sys
        from explorer.cli import main
        heavy = lambda: sorted(m for m in ("jax", "flax", "optax") if m in sys.modules)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                main(["--help"])
            except SystemExit:
                pass
            print(main(["train", "--mode", "nope"]), main(["inspect", {str(path)!r}]),
                  file=sys.__stdout__)
        print("before", heavy())
        out = io.StringIO()
        print(main(["train", "--graph", "karate", "--epochs", "2"], out=out),
              out.getvalue().strip().splitlines()[-1].split(":")[0])
        print("after", heavy(), "IPython" in sys.modules)
        """)
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:4] == ["2 0", "before []", "0 verdict",
                                              "after ['flax', 'jax', 'optax'] False"]


def test_presets_and_features_from_flags():
    code, text = run_cli("train", "--graph", "sbm", "--difficulty", "0.2", "--features",
                         "laplacian", "--epochs", "3")
    assert code == 0 and "graph sbm" in text and "verdict: training" in text


def test_inspect_a_graph_file(tmp_path):
    path = tmp_path / "g.edgelist"
    path.write_text("a b 1.0\nb c 2.0\nc c 1.0\n")
    code, text = run_cli("inspect", str(path))
    assert code == 0
    assert text.splitlines()[:4] == ["nodes: 3", "edges: 3 (undirected)", "features: 0",
                                     "labels: 0"]
    assert "warning: g.edgelist: 1 self loops kept" in text


def test_inspect_a_bad_file_prints_one_line_and_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("from,to\na,b\n")
    assert main(["inspect", str(path)], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.csv line 1: header must be" in err
    assert main(["inspect", str(tmp_path / "missing.npz")], out=io.StringIO()) == 2


def test_train_a_graph_classification_dataset_from_the_command_line():
    out = io.StringIO()
    code = main(["train", "--graph", "cycle_vs_tree", "--layers", "gin:16,gin:16",
                 "--pool", "sum", "--norm", "graph", "--batch-norm", "--epochs", "5",
                 "--every", "5"], out=out)
    text = out.getvalue()
    assert code == 0 and "graph cycle_vs_tree" in text and "verdict: training" in text


def test_train_cora_uses_its_features_and_public_split():
    code, text = run_cli("train", "--graph", "cora", "--epochs", "3", "--every", "1")
    lines = text.strip().splitlines()
    assert code == 0 and lines[0].startswith("mode nnx.jit | graph cora | 3 steps")
    steps = [ln.split() for ln in lines[2:5]]
    assert [int(s[0]) for s in steps] == [1, 2, 3]
    assert float(steps[-1][1]) < float(steps[0][1])  # the loss falls
    assert lines[-1].startswith("verdict: training: 4 of 4 parameters changed")


def test_features_default_to_the_presets_own():
    from explorer.cli import _config, _parser

    def config(*argv):
        return _config(_parser().parse_args(["train", *argv]))

    assert config("--graph", "cora").features == "file"
    assert config("--graph", "karate").features == "one_hot"
    assert config("--graph", "cora", "--features", "degree").features == "degree"
    assert config().features == "one_hot"  # karate, the default graph


def test_config_file_features_win_over_the_preset_default(tmp_path):
    from explorer.cli import _config, _parser

    path = tmp_path / "run.json"
    path.write_text(json.dumps({"graph": "cora", "features": "constant"}))
    args = _parser().parse_args(["train", "--config", str(path)])
    assert _config(args).features == "constant"
    path.write_text(json.dumps({"graph": "cora"}))
    assert _config(_parser().parse_args(["train", "--config", str(path)])).features == "file"


def test_file_features_on_a_graph_without_them_exit_2(capsys):
    assert main(["train", "--graph", "karate", "--features", "file"], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "features 'file'" in err and "cora, citeseer" in err


def test_inspect_prints_the_split():
    code, text = run_cli("inspect", str(REPO / "assets" / "cora.npz"))
    assert code == 0
    assert text.splitlines()[:5] == ["nodes: 2708", "edges: 5278 (undirected)",
                                     "features: 1433", "labels: 7",
                                     "split: 140 train / 500 val / 1000 test"]
