"""explorer.startup: the app's and the CLI's processes import Flax without
IPython (Flax imports it only to ask whether a shell is running)."""

import importlib.util
import subprocess
import sys

import pytest
from conftest import REPO

HAS_IPYTHON = importlib.util.find_spec("IPython") is not None


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, *args, "-c", code] if code else
                         [sys.executable, *args], cwd=REPO, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.mark.skipif(not HAS_IPYTHON, reason="IPython is not installed here")
def test_flax_imported_in_the_block_leaves_ipython_out_and_a_process_with_it_keeps_it():
    out = _python(
        "import sys\n"
        "from explorer.startup import without_ipython\n"
        "with without_ipython():\n"
        "    import flax.nnx\n"
        "    from flax.nnx import reprlib\n"
        "print('IPython' in sys.modules, reprlib.supports_color())\n"
        "import IPython\n"  # afterwards it imports as usual
        "print(IPython.get_ipython())\n"
        "with without_ipython():\n"  # already imported: left as it is
        "    import IPython as again\n"
        "print(again is IPython, sys.modules['IPython'] is IPython)\n")
    assert out.stdout.split("\n")[:3] == ["False False", "None", "True True"], out.stdout


@pytest.mark.skipif(not HAS_IPYTHON, reason="IPython is not installed here")
def test_the_cli_and_the_app_start_without_importing_ipython():
    # the CLI as a person runs it (a command that loads Flax: ``--help`` loads no
    # JAX, tests/explorer/test_cli.py); its imports as Python reports them
    out = _python("", "-X", "importtime", "-m", "explorer", "train", "--graph", "path",
                  "--epochs", "1")
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()
                if line.startswith("import time:")}
    # (a refused ``import IPython`` still gets a line: no IPython module loaded)
    assert "flax.nnx" in imported and not any(m.startswith("IPython.") for m in imported)
    # the app's first page, model built
    out = _python(
        "import sys\n"
        "from streamlit.testing.v1 import AppTest\n"
        "at = AppTest.from_file('streamlit_app.py', default_timeout=120).run()\n"
        "assert not at.exception, at.exception\n"
        "assert at.session_state['workspace'].run is not None\n"
        "print('flax.nnx' in sys.modules, 'IPython' in sys.modules, flush=True)\n"
        # the app compiles the step in a background thread after the page: an
        # interpreter exit in the middle of it can abort; this probe is done
        "import os; os._exit(0)\n")
    assert out.stdout.strip() == "True False", out.stdout


def test_the_first_page_does_not_walk_the_stack_to_ask_if_it_runs_in_a_repl():
    # Streamlit asks once per process, at the first element; with JAX and Flax
    # loaded, its walk of the stack took 0.16 s of the server's first page
    out = _python(
        "from streamlit import env_util\n"
        "asked = []\n"
        "env_util.is_repl = lambda: asked.append(1) or False\n"
        "import explorer.ui.app as app\n"
        "import streamlit as st\n"
        "app.main = lambda: st.title('first page')\n"
        "from explorer.ui import script\n"
        "script.start()\n"
        "print(len(asked))\n")
    assert out.stdout.strip() == "0", out.stdout
    # and without the app's script, Streamlit does ask: the probe sees the question
    out = _python(
        "from streamlit import env_util\n"
        "asked = []\n"
        "env_util.is_repl = lambda: asked.append(1) or False\n"
        "import streamlit as st\n"
        "st.title('first page')\n"
        "print(len(asked))\n")
    assert out.stdout.strip() == "1", out.stdout
