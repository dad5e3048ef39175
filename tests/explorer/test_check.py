"""``python -m explorer check``: the examples, each as a person runs it, in a
subprocess, with the exit code and the verdicts it must print; and the
public audit on functional steps and copies."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import REPO
from flax import nnx

from explorer.audit import FrozenTrainingError, assert_training, audit_step

#: example -> (exit code, lines the report must contain)
EXAMPLES = {
    "frozen_jax_jit.py": (1, ["jax.jit(train_step): 10 call(s), 1 trace(s)",
                              "verdict: frozen: 0 of 4 parameters changed",
                              "fix: wrap the step in nnx.jit"]),
    "nnx_jit_fixed.py": (0, ["nnx.jit(train_step): 10 call(s), 1 trace(s)",
                             "verdict: training: 4 of 4 parameters changed",
                             "jax.jit(evaluate): 1 call(s): no NNX parameter or optimizer "
                             "state changed inside it and it returns no state: not a "
                             "training step (not judged)"]),
    "functional_loop.py": (0, ["jax.jit(train_step): 10 call(s), 1 trace(s)",
                               "verdict: training: 4 of 4 parameters changed"]),
    "functional_forgets_update.py": (1, ["verdict: stale objects:",
                                         "`MLP` still hold(s) the initial weights",
                                         "fix: write the state back with nnx.update"]),
    "retracing.py": (0, ["nnx.jit(train_step): 8 call(s), 8 trace(s)",
                         "traced at call 2: x: float32[33, 4] -> float32[34, 4]",
                         "verdict: retracing every call"]),
    "diverging.py": (0, ["verdict: non-finite: first at call", "fix: lower the learning rate"]),
    "test_my_training.py": (0, ["verdict: training", "my training steps train"]),
    "no_nnx.py": (0, ["check: no jitted function received NNX modules or state"]),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Every example through ``check`` at once (they run side by side)."""
    logs = tmp_path_factory.mktemp("runs")
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    procs = {}
    for name in EXAMPLES:
        extra = ["--log", str(logs)] if name == "frozen_jax_jit.py" else []
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "explorer", "check", *extra, f"examples/{name}"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = {name: (p.wait(timeout=600), p.stdout.read()) for name, p in procs.items()}
    return out, logs


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_each_example_gets_its_verdict_and_exit_code(reports, name):
    code, text = reports[0][name]
    expected_code, lines = EXAMPLES[name]
    assert code == expected_code, text
    for line in lines:
        assert line in text, (line, text)


def test_examples_are_each_in_the_readme():
    readme = (REPO / "README.md").read_text()
    for name in EXAMPLES:
        assert f"examples/{name}" in readme, name


def test_check_writes_a_run_log_the_app_can_read(reports):
    from explorer.runlog import list_runs, read_run

    logs = reports[1]
    (name,) = list_runs(logs)
    run = read_run(logs / name)
    assert run.final["verdict"] == "frozen" and len(run.records) == 10
    assert run.changes.shape[1] == 10
    assert np.all(np.isnan(run.changes[:, 0]))  # the first call has nothing to compare with
    assert float(np.abs(run.changes[:, 1:]).max()) == 0.0  # frozen: nothing ever moved


def test_check_refuses_a_missing_script(tmp_path):
    from explorer.check import main

    assert main([str(tmp_path / "nope.py")]) == 2


def test_a_failing_script_exits_2_and_is_still_reported(tmp_path, capsys):
    from explorer.check import main

    script = tmp_path / "boom.py"
    script.write_text("import sys\nprint('started', sys.argv[1:])\nraise RuntimeError('boom')\n")
    assert main([str(script), "--flag", "x"]) == 2
    out = capsys.readouterr()
    assert "started ['--flag', 'x']" in out.out and "RuntimeError: boom" in out.err
    assert "no jitted function received NNX" in out.out


# ------------------------------------------------------------- the public audit
def _setup():
    model = nnx.Sequential(nnx.Linear(3, 8, rngs=nnx.Rngs(0)), nnx.Linear(8, 1, rngs=nnx.Rngs(1)))
    optimizer = nnx.Optimizer(model, optax.adam(0.01), wrt=nnx.Param)
    x, y = jnp.ones((8, 3)), jnp.zeros((8, 1))
    return model, optimizer, x, y


def _step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    optimizer.update(model, grads)
    return loss


def test_a_correct_functional_step_is_training_not_frozen():
    model, optimizer, x, y = _setup()
    graphdef, state = nnx.split((model, optimizer))

    @jax.jit
    def functional_step(state, x, y):
        m, opt = nnx.merge(graphdef, state)
        loss = _step(m, opt, x, y)
        return nnx.state((m, opt)), loss

    report = assert_training(functional_step, (state,), (x, y), steps=3)
    assert report.verdict.status == "training"
    assert report.verdict.evidence[:2] == ("4 of 4 parameters changed", "optimizer step advanced")
    assert len(report.losses) == 3 and report.losses[-1] < report.losses[0]


def test_the_audit_trains_a_copy_not_your_model():
    model, optimizer, x, y = _setup()
    before = [a for a in jax.tree.leaves(nnx.state((model, optimizer)))]
    assert_training(nnx.jit(_step), (model, optimizer), (x, y), steps=3)
    after = jax.tree.leaves(nnx.state((model, optimizer)))
    assert all(a is b for a, b in zip(before, after)) and int(optimizer.step[...]) == 0


@pytest.mark.parametrize("bad, named", [("model", "got a bare Sequential: pass (sequential,)"),
                                        ("list of ints", "modules[0] is a int"),
                                        ("none", "got NoneType")])
def test_a_wrong_modules_argument_says_what_is_expected(bad, named):
    model, optimizer, x, y = _setup()
    modules = {"model": model, "list of ints": [1, 2], "none": None}[bad]
    with pytest.raises(TypeError, match="tuple .* of the step's NNX arguments") as err:
        audit_step(nnx.jit(_step), modules, (x, y))
    assert named in str(err.value)


def test_a_frozen_functional_step_that_returns_its_input_is_caught():
    model, optimizer, x, y = _setup()
    graphdef, state = nnx.split((model, optimizer))

    @jax.jit
    def forgetful(state, x, y):
        old = jax.tree.map(jnp.copy, state)
        m, opt = nnx.merge(graphdef, state)
        loss = _step(m, opt, x, y)
        return old, loss  # the state from before the update: nothing is learned

    with pytest.raises(FrozenTrainingError, match="0 of 4 parameters changed"):
        assert_training(forgetful, (state,), (x, y))
