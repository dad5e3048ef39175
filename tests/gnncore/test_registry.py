"""gnncore's name tables and its package: ``import gnncore`` loads no JAX,
the tables answer which names there are without it, and every public name
still imports from its module on first use."""

import subprocess
import sys

import pytest
from conftest import REPO

import gnncore
from gnncore import registry


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


def test_importing_gnncore_and_reading_its_names_loads_no_jax():
    out = _fresh(
        "import sys, gnncore\n"
        "names = (sorted(gnncore.CONV_TYPES), gnncore.POOLS, sorted(gnncore.NORMS),\n"
        "         sorted(gnncore.ACTIVATIONS), 'gat' in gnncore.CONV_TYPES,\n"
        "         'nope' in gnncore.NORMS, len(gnncore.CONV_TYPES))\n"
        "print([m for m in ('jax', 'flax', 'optax') if m in sys.modules], names)\n"
        "print(gnncore.Graph.__module__, 'jax' in sys.modules)\n")
    first, second = out.splitlines()
    assert first == ("[] (['cheb', 'gat', 'gatv2', 'gcn', 'gin', 'graph', 'sage', 'sg', "
                     "'transformer'], ('mean', 'sum', 'max', 'min'), ['batch', 'graph', "
                     "'layer'], ['elu', 'gelu', 'identity', 'leaky_relu', 'relu', 'tanh'], "
                     "True, False, 9)")
    assert second == "gnncore.graph True"  # a name's first use imports its module


def test_the_tables_hand_out_gnncores_own_objects():
    from gnncore.conv import GATConv, GCNConv, TransformerConv
    from gnncore.norm import BatchNorm
    from gnncore.pool import global_add_pool

    assert gnncore.CONV_TYPES["gcn"] is GCNConv and gnncore.CONV_TYPES["gat"] is GATConv
    assert gnncore.CONV_TYPES["transformer"] is TransformerConv
    assert gnncore.NORMS["batch"] is BatchNorm
    assert registry.POOL_FNS["sum"] is global_add_pool
    assert float(gnncore.ACTIVATIONS["relu"](-2.0)) == 0.0
    assert gnncore.ACTIVATIONS["identity"](3) == 3
    assert dict(gnncore.CONV_TYPES.items())["sage"] is gnncore.SAGEConv
    with pytest.raises(KeyError):
        gnncore.CONV_TYPES["nope"]


def test_headed_kinds_are_the_classes_with_heads():
    # a copy, for a form that must know before the classes load: checked here
    assert registry.HEADED_KINDS == {k for k, cls in gnncore.CONV_TYPES.items()
                                     if cls.has_heads}


def test_every_public_name_resolves_and_unknown_ones_raise():
    for name in gnncore.__all__:
        assert getattr(gnncore, name) is not None, name
        assert name in dir(gnncore)
    assert "Graph" in gnncore.__all__ and "CONV_TYPES" in gnncore.__all__
    with pytest.raises(AttributeError, match="no attribute 'NotAThing'"):
        gnncore.NotAThing  # noqa: B018
    from gnncore import GCNConv, segment_sum  # the usual way still works

    assert GCNConv is gnncore.conv.gcn.GCNConv and callable(segment_sum)


def test_importing_gnncore_first_still_asks_for_its_xla_flags():
    out = _fresh(
        "import os, sys, gnncore\n"
        "print('jax' in sys.modules, gnncore.xla.CPU_FLAGS[0] in os.environ['XLA_FLAGS'],\n"
        "      gnncore.xla.REDUCTIONS_IN_XLA)\n")
    assert out == "False True True"
