"""The app's persistent compilation cache (explorer/compile_cache.py): off by
the environment, a fresh process reads back what an earlier one compiled, and
the app's script turns it on."""

import json
import os
import subprocess
import sys
from pathlib import Path

from explorer import compile_cache

REPO = Path(__file__).resolve().parents[2]

# A fresh process: turn the cache on, train two steps of the karate GCN (the
# explorer's own Run), and say how many compiles the cache answered.
CHILD = """
import json, sys
from explorer import compile_cache
path = compile_cache.enable()
from explorer.config import RunConfig
from explorer.engine import Run
before = compile_cache.hits()
run = Run(RunConfig(mode=sys.argv[1]))
run.train(2)
print(json.dumps({"dir": str(path) if path else None, "hits": compile_cache.hits() - before,
                  "loss": run.history[-1].loss}))
"""


def _child(env: dict, mode: str = "nnx.jit") -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != compile_cache.ENV}
    env.update(JAX_PLATFORMS="cpu", **extra)
    return env


def test_the_directory_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path / "c"))
    assert compile_cache.cache_dir() == tmp_path / "c"
    for off in ("off", "OFF", "0", "false"):
        monkeypatch.setenv(compile_cache.ENV, off)
        assert compile_cache.cache_dir() is None
    monkeypatch.delenv(compile_cache.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.cache_dir() == tmp_path / "xdg" / "gnn-jit-explorer" / "jax"


def test_a_second_process_reads_the_compiled_step_back(tmp_path):
    env = _env(**{compile_cache.ENV: str(tmp_path / "cache")})
    cold = _child(env)
    assert cold["dir"] == str(tmp_path / "cache")
    assert cold["hits"] == 0  # an empty cache: XLA compiled everything
    assert any((tmp_path / "cache").iterdir()), "nothing was written to the cache"
    warm = _child(env)
    assert warm["hits"] >= 2  # the training step and the evaluation, read back
    assert warm["loss"] == cold["loss"]  # the same program: the same numbers


def test_off_means_every_compile_is_cold(tmp_path):
    got = _child(_env(**{compile_cache.ENV: "off"}))
    assert got["dir"] is None and got["hits"] == 0


def test_the_app_script_turns_it_on_when_jax_loads(tmp_path):
    # what `streamlit run streamlit_app.py` runs first, in a fresh process: the
    # first page loads no JAX; the first model's engine does, cache on first
    code = ("import sys\nimport explorer.ui.app as app\napp.main = lambda: None\n"
            "from explorer.ui import script\nscript.start()\n"
            "from explorer import compile_cache\n"
            "print('jax' in sys.modules, compile_cache.enabled())\n"
            "from explorer.engine import Run\nimport jax\n"
            "print(compile_cache.enabled(), jax.config.jax_compilation_cache_dir)")
    env = _env(**{compile_cache.ENV: str(tmp_path / "app-cache")})
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["False", "None"] + [str(tmp_path / "app-cache")] * 2


# The compile-vs-run measurement with the cache on, after the live step wrote its
# program there: each measurement asks the cache, which does not answer, so XLA
# compiles (the same program without the measurement's salt is a read), and
# the measurement adds no entry.
MEASURE = """
import json, os
import jax
from explorer import compile_cache
cache = compile_cache.enable()
asked = []  # compiles that asked the persistent cache
jax.monitoring.register_event_listener(
    lambda event, **kw: asked.append(event)
    if event == "/jax/compilation_cache/compile_requests_use_cache" else None)
from explorer.config import RunConfig
from explorer.engine import Run
run = Run(RunConfig(mode="nnx.jit"))
run.train(2)
files = set(os.listdir(cache))
before = len(asked)
first = run.compile_breakdown()
second = run.compile_breakdown()
measured = len(asked) - before
new_files = sorted(set(os.listdir(cache)) - files)
fn, args = run.stepper.lowerable(run.inputs, run.task.targets)
fn.trace(*args).lower().compile()  # the ordinary path: compiles and writes the entry...
fn, args = run.stepper.lowerable(run.inputs, run.task.targets)  # a new function: no
lowered = fn.trace(*args).lower()  # in-memory cache, the persistent one answers
hits, before = compile_cache.hits(), len(asked)
lowered.compile()  # ...which the next compile of the same program reads back
print(json.dumps({"cached": [first["compile_cached"], second["compile_cached"]],
                  "measured_asked": measured, "read_asked": len(asked) - before,
                  "new_files": new_files, "hits": compile_cache.hits() - hits}))
"""


def test_the_compile_measurement_runs_xla_and_writes_nothing(tmp_path):
    env = _env(**{compile_cache.ENV: str(tmp_path / "cache")})
    out = subprocess.run([sys.executable, "-c", MEASURE], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["cached"] == [False, False]
    assert got["new_files"] == []
    assert got["measured_asked"] == 2  # both measurements asked, no hit: XLA ran...
    assert got["read_asked"] == 1 and got["hits"] == 1  # ...where the ordinary one read
