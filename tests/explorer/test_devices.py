"""A run on several devices (RunConfig.devices, explorer/engine/sharding.py):
the same losses as one device in every mode, the inputs really split, the
race's 1-vs-N lanes, the CLI's --devices, and a clear refusal when the
devices are not there.

Several CPU devices exist only if XLA_FLAGS asks for them before JAX starts,
so the multi-device checks run in one subprocess (JAX starts once) that prints
JSON; the tests read their part of it."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import xla_flags

from explorer.config import ConfigError, RunConfig
from explorer.engine import Run
from explorer.engine.sharding import split_axis
from explorer.race import lanes

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import io, json
    import numpy as np
    from explorer.cli import main
    from explorer.config import ConfigError, RunConfig
    from explorer.engine import Run
    from explorer.race import race

    out = {"losses": {}}
    cases = {
        "karate": dict(graph="karate", bucket_padding=True, dropout=0.5, batch_norm=True),
        "karate-unpadded": dict(graph="karate"),
        "dataset": dict(graph="cycle_vs_tree", features="degree", bucket_padding=True),
    }
    plan = {("karate", "nnx.jit"): (1, 2, 4), ("karate", "functional"): (1, 4),
            ("karate", "jax.jit"): (1, 4), ("karate", "scan"): (1, 4),
            ("karate-unpadded", "nnx.jit"): (1, 2),
            ("dataset", "nnx.jit"): (1, 2, 4)}
    for (name, mode), counts in plan.items():
            extra = cases[name]
            for n in counts:
                run = Run(RunConfig(mode=mode, devices=n, scan_steps=5, **extra))
                while len(run.history) < 10:
                    run.advance()
                out["losses"][f"{name}|{mode}|{n}"] = [r.loss for r in run.history]
                if mode == "nnx.jit" and n == 4:
                    out["layout|" + name] = run.layout()
                    x = run.inputs.x
                    out["shards|" + name] = [list(s.data.shape) for s in x.addressable_shards]
    entries = race(RunConfig(devices=2, dropout=0.0), steps=3, modes=["nnx.jit"])
    out["race"] = [[e.label, e.devices, e.verdict, list(e.losses)] for e in entries]
    text = io.StringIO()
    out["cli_rc"] = main(["train", "--devices", "4", "--epochs", "3", "--bucket-padding"], text)
    out["cli"] = text.getvalue()
    from explorer.lessons import find
    lesson = find("unsynced-replicas")
    out["lesson"] = {side: [lesson.outcome(side).evidence, list(lesson.outcome(side).rows)]
                     for side in ("pitfall", "fix")}
    try:
        Run(RunConfig(devices=8))
    except ConfigError as err:
        out["too_many"] = [err.field, str(err)]
    print("RESULT " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def four():
    env = dict(os.environ, XLA_FLAGS=xla_flags("--xla_force_host_platform_device_count=4"),
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(s for s in done.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_every_mode_loses_the_same_on_1_2_and_4_devices(four):
    losses = four["losses"]
    assert len(losses) == 3 + 2 * 3 + 2 + 3
    for key, values in losses.items():
        name, mode, n = key.split("|")
        one = losses[f"{name}|{mode}|1"]
        assert len(values) == 10
        assert max(abs(a - b) for a, b in zip(values, one)) <= 1e-5, key
    # and the runs trained (the pitfall stays frozen on every device count)
    assert losses["karate|nnx.jit|4"][-1] < losses["karate|nnx.jit|4"][0]
    assert len(set(losses["karate|jax.jit|4"])) == 1


def test_the_inputs_are_split_and_the_model_is_copied(four):
    for name in ("karate", "dataset"):
        rows = {r["name"]: r for r in four["layout|" + name]}
        x = rows["inputs.x"]
        assert x["spec"] == "P('data', None)" and x["devices"] == 4
        assert x["shard"][0] * 4 == x["shape"][0]
        assert four["shards|" + name] == [x["shard"]] * 4  # each device holds a quarter
        params = [r for n, r in rows.items() if n.startswith("model.")]
        assert params and all(r["spec"] == "P()" and r["shard"] == r["shape"]
                              for r in params)


def test_the_race_runs_each_mode_on_one_and_on_n_devices(four):
    labels = [e[0] for e in four["race"]]
    assert labels == ["nnx.jit", "nnx.jit × 2 devices"]
    by = {e[0]: e for e in four["race"]}
    assert by["nnx.jit × 2 devices"][1] == 2 and by["nnx.jit × 2 devices"][2] == "training"
    assert max(abs(a - b) for a, b in zip(by["nnx.jit"][3], by["nnx.jit × 2 devices"][3])) \
        <= 1e-5


def test_the_cli_trains_on_the_devices_asked_for(four):
    assert four["cli_rc"] == 0
    assert "devices 4: mesh axis 'data' over cpu:0, cpu:1, cpu:2, cpu:3" in four["cli"]
    assert "verdict: training" in four["cli"]


def test_more_devices_than_there_are_is_refused_naming_the_field(four):
    field, message = four["too_many"]
    assert field == "devices" and "XLA_FLAGS" in message and "8" in message


def test_one_device_process_refuses_two():
    with pytest.raises(ConfigError) as err:
        Run(RunConfig(devices=2))
    assert err.value.field == "devices"
    assert "xla_force_host_platform_device_count=2" in str(err.value)


@pytest.mark.parametrize("value", [0, 65, 1.5])
def test_devices_out_of_range_is_a_config_error(value):
    with pytest.raises(ConfigError) as err:
        RunConfig.from_dict({"devices": value})
    assert err.value.field == "devices"


def test_the_split_axis_is_the_longest_one_that_divides():
    assert split_axis((64, 34), 4) == 0
    assert split_axis((2, 256), 4) == 1
    assert split_axis((65,), 4) is None  # CSR pointers: replicated
    assert split_axis((34, 16), 4) is None and split_axis((34, 16), 2) == 0
    assert split_axis((8,), 1) is None and split_axis((), 4) is None


def test_the_race_lanes_add_n_devices_only_when_asked():
    assert lanes(RunConfig(), ["nnx.jit"]) == [("nnx.jit", 1)]
    assert lanes(RunConfig(devices=4), ["nnx.jit", "eager"]) == [
        ("nnx.jit", 1), ("nnx.jit", 4), ("eager", 1), ("eager", 4)]


def test_an_exported_script_says_it_trains_on_one_device():
    from explorer.export import script_for

    text = script_for(RunConfig(devices=4))
    assert "trained this run on 4 devices" in text and "this script trains on" in text
    assert "devices" not in script_for(RunConfig()).split("The full run configuration")[0]


def test_the_replicas_lesson_runs_shard_map_on_devices_and_vmap_on_one(four):
    from explorer.lessons import find

    lesson = find("unsynced-replicas")
    for side in ("pitfall", "fix"):
        evidence, rows = four["lesson"][side]
        assert "jax.shard_map over 2 devices" in evidence[0]
        here = lesson.outcome(side)  # this process has one device
        assert "jax.vmap(axis_name='data')" in here.evidence[0]
        for a, b in zip(rows, here.rows):  # the same function, the same numbers
            assert a.keys() == b.keys()
            assert all(abs(a[k] - b[k]) <= 1e-4 for k in a)
