"""The README's commands are the ones CI runs; the library stays UI-free."""

import re

from conftest import REPO


def _bash_blocks(text):
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    blocks = [b.strip() for b in _bash_blocks(readme)]
    test_cmds = [b for b in blocks if "pytest" in b]
    assert len(test_cmds) == 1, blocks
    ci_lines = [ln.strip() for ln in (REPO / ".ci/run").read_text().splitlines()
                if ln.strip() and not ln.startswith("#") and not ln.startswith(("set ", "cd "))]
    assert ci_lines == [test_cmds[0]]


def test_readme_starts_the_app():
    readme = (REPO / "README.md").read_text()
    app_cmds = [b.strip() for b in _bash_blocks(readme) if "streamlit run" in b]
    assert len(app_cmds) == 1
    assert app_cmds[0].endswith("streamlit run streamlit_app.py")
    assert "-r requirements.txt" in app_cmds[0]


def test_gnncore_imports_no_ui_packages():
    pattern = re.compile(r"^\s*(import|from)\s+(streamlit|plotly)\b", re.M)
    offenders = [p.name for p in (REPO / "gnncore").rglob("*.py")
                 if pattern.search(p.read_text())]
    assert offenders == []


def test_engine_imports_streamlit_only_in_ui():
    pattern = re.compile(r"^\s*(import|from)\s+streamlit\b", re.M)
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "explorer").rglob("*.py")
                 if pattern.search(p.read_text()) and "ui" not in p.relative_to(REPO).parts]
    assert offenders == []


def test_requirements_pin_the_stack():
    pins = dict(line.split("==") for line in (REPO / "requirements.txt").read_text().split("\n")
                if "==" in line and not line.startswith("#"))
    assert pins["jax"] == "0.10.2"
    assert pins["flax"] == "0.12.8"
    assert pins["optax"] == "0.2.8"
    assert pins["streamlit"] == "1.67.0"
    assert pins["networkx"] == "3.6.1"
    assert pins["plotly"] == "7.1.0"


def test_code_passes_ruff():
    import shutil
    import subprocess

    ruff = shutil.which("ruff")
    assert ruff, "ruff is in requirements-test.txt"
    result = subprocess.run([ruff, "check", "--quiet", "gnncore", "explorer", "tests",
                             "benchmarks", "streamlit_app.py"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_app_entry_point_limits_openblas_to_one_thread_before_numpy_loads():
    """``streamlit run`` has not loaded numpy when streamlit_app.py starts; the
    entry point sets OPENBLAS_NUM_THREADS before anything loads numpy (see its
    comment). An import hook records the variable when numpy is first found;
    the UI is replaced by a stub."""
    import subprocess
    import sys

    probe = (
        "import os, runpy, sys, types\n"
        "os.environ.pop('OPENBLAS_NUM_THREADS', None)\n"
        "seen = []\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'numpy':\n"
        "            seen.append(os.environ.get('OPENBLAS_NUM_THREADS'))\n"
        "sys.meta_path.insert(0, Spy())\n"
        "ui = types.ModuleType('explorer.ui.app')\n"
        "def main():\n"
        "    import numpy\n"
        "ui.main = main\n"
        "sys.modules['explorer.ui.app'] = ui\n"
        "runpy.run_path('streamlit_app.py', run_name='__main__')\n"
        "print(seen[:1])\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, timeout=120, check=True).stdout.strip()
    assert out == "['1']", out


def test_pyproject_lists_every_package():
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"])
    found = {".".join(p.relative_to(REPO).parts[:-1]) for top in ("gnncore", "explorer")
             for p in (REPO / top).rglob("__init__.py")}
    assert found | {"gnn_jit_explorer_assets"} == listed


def test_the_package_installs_with_its_assets_and_command(tmp_path):
    """``pip install .`` gives gnncore + the engine with version ranges, the
    shipped assets and the ``gnn-jit-explorer`` command (built here as a
    wheel and installed into a fresh venv that sees this environment's
    packages, so nothing else is downloaded). The wheel is built with this
    environment's setuptools and the venv gets no pip of its own (this pip
    installs into it): the same wheel and install, 1.8 s and 0.2 s instead of
    5.3 s for an isolated build and 4.8 s for a venv with pip."""
    import subprocess
    import sys
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(tmp_path / "dist")],
                   check=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("gnn_jit_explorer-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA")))
    assert b"Requires-Dist: jax<0.11,>=0.10" in meta and b'extra == "app"' in meta
    assert "gnn_jit_explorer_assets/cora.npz" in names
    assert "explorer/ui/graph_canvas.js" in names
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "--no-deps", "-q", str(wheel)], check=True, timeout=300)
    script = tmp_path / "train.py"
    script.write_text((REPO / "examples" / "frozen_jax_jit.py").read_text())
    (tmp_path / "_data.py").write_text((REPO / "examples" / "_data.py").read_text())
    run = subprocess.run([str(venv / "bin" / "gnn-jit-explorer"), "check", str(script)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    assert run.returncode == 1 and "verdict: frozen" in run.stdout, run.stdout + run.stderr
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import explorer.sources as s; print(s.ASSETS); print(s.load_graph('cora').num_nodes)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr
    assets, nodes = where.stdout.split()
    assert "site-packages" in assets and str(REPO) not in assets and nodes == "2708"
