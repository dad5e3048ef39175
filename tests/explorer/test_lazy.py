"""explorer.lazy: a module imported on its first attribute read, gnncore's
XLA flags and the callbacks of ``when_loaded`` first."""

import subprocess
import sys

from conftest import REPO

from explorer.lazy import lazy


def test_a_loaded_module_is_handed_back_as_it_is():
    import json

    assert lazy("json") is json


def test_first_read_loads_gnncore_then_the_callbacks_then_the_module():
    code = (
        "import sys\n"
        "from explorer.lazy import lazy, when_loaded\n"
        "seen = []\n"
        "when_loaded(lambda: seen.append(('jax' in sys.modules, 'gnncore' in sys.modules)))\n"
        "when_loaded(lambda: seen.append('second'))\n"
        "jnp = lazy('jax.numpy')\n"
        "print(repr(jnp), 'jax' in sys.modules, seen)\n"
        "print(int(jnp.arange(4).sum()), seen, repr(jnp))\n"
        "jnp.zeros(1)\n"
        "print(seen)\n"
        "late = lambda: seen.append('late')\n"
        "when_loaded(late)  # JAX is loaded: called at once\n"
        "when_loaded(late)  # and only once\n"
        "print(seen)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "<lazy module 'jax.numpy' (not loaded yet)> False []",
        "6 [(False, True), 'second'] <lazy module 'jax.numpy' (loaded)>",
        "[(False, True), 'second']",  # once
        "[(False, True), 'second', 'late']",
    ]
