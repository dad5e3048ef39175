"""The "Your runs" page: run logs listed, shown with the Diagnose panel's
figures, followed while they grow, uploaded safely."""

import io
import json
import zipfile

import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx
from streamlit.testing.v1 import AppTest

from explorer.runlog import read_upload, runs_dir
from explorer.watcher import watch


def _page():
    from explorer.ui import runs_panel

    runs_panel.render()


def _write_run(root, name: str, calls: int, jit=jax.jit):
    model = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
    x, y = jnp.ones((4, 3)), jnp.zeros((4, 1))

    def step(model, optimizer, x, y):
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        optimizer.update(model, grads)
        return loss

    watched = watch(jit(step), log_dir=root, name=name, warn=False)
    for _ in range(calls):
        watched(model, optimizer, x, y)
    return watched, (model, optimizer, x, y)


def _texts(elements):
    return [e.value for e in elements]


def test_a_run_is_listed_and_shown_with_the_diagnose_figures(tmp_path, monkeypatch):
    watched, _ = _write_run(tmp_path, "frozen step", 5)
    watched.close()
    monkeypatch.setenv("EXPLORER_RUNS", str(tmp_path))
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="r_pick").options == ["frozen_step"]
    banner = " ".join(_texts(at.error))
    assert "**FROZEN** — 0 of 2 parameters changed" in banner and "nnx.jit" in banner
    assert any("5 recorded call(s) · finished" in t for t in _texts(at.caption))
    assert len(at.get("plotly_chart")) == 3  # loss, step time with traces, heatmap


def test_a_run_being_written_is_read_again(tmp_path, monkeypatch):
    watched, args = _write_run(tmp_path, "live", 2, jit=nnx.jit)
    monkeypatch.setenv("EXPLORER_RUNS", str(tmp_path))
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert any("2 recorded call(s) · being written" in t for t in _texts(at.caption))
    for _ in range(3):
        watched(*args)
    at.run()
    assert any("5 recorded call(s) · being written" in t for t in _texts(at.caption))
    assert "**TRAINING**" in " ".join(_texts(at.success))


def test_no_runs_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_RUNS", str(tmp_path / "none"))
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert "python -m explorer check --log runs" in " ".join(_texts(at.info))


def test_the_runs_folder_comes_from_the_command_line_or_the_environment():
    assert str(runs_dir(["--runs", "/data/logs"], {})) == "/data/logs"
    assert str(runs_dir(["--runs=logs2"], {"EXPLORER_RUNS": "x"})) == "logs2"
    assert str(runs_dir([], {"EXPLORER_RUNS": "/srv/runs"})) == "/srv/runs"
    assert str(runs_dir([], {})) == "runs"


def _zip(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buffer.getvalue()


def test_an_uploaded_log_is_read_from_its_own_files_only(tmp_path):
    watched, _ = _write_run(tmp_path, "up", 3)
    watched.close()
    folder = tmp_path / "up"
    members = {f"up/{p.name}": p.read_bytes() for p in folder.iterdir()}
    members["../../evil.txt"] = b"never written"
    members["up/other.pickle"] = b"\x80\x04never read"
    run = read_upload("up.zip", _zip(members))
    assert len(run.records) == 3 and run.final["verdict"] == "frozen"
    assert not (tmp_path.parent / "evil.txt").exists()
    lines = (folder / "records.jsonl").read_bytes()
    assert len(read_upload("records.jsonl", lines).records) == 3


@pytest.mark.parametrize("name, data, message", [
    ("log.zip", b"not a zip", "not a zip file"),
    ("log.zip", None, "no records.jsonl"),
    ("log.txt", b"{}", "upload a .zip"),
    ("records.jsonl", b"garbage\n[1, 2]\n", "no records could be read"),
])
def test_bad_uploads_are_refused_naming_why(name, data, message):
    if data is None:
        data = _zip({"meta.json": json.dumps({"schema": 1})})
    with pytest.raises(ValueError, match=message):
        read_upload(name, data)


def test_a_zip_bomb_is_refused_from_its_directory():
    bomb = _zip({"records.jsonl": b"\n" * (21 * 2**20)})  # compresses to ~20 kB
    assert len(bomb) < 100_000
    with pytest.raises(ValueError, match="unpacks to more than 20 MB"):
        read_upload("bomb.zip", bomb)
