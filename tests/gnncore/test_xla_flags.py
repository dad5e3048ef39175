"""gnncore asks XLA's CPU compiler to keep reductions in its own loops
(``gnncore.xla``): the flag reaches ``XLA_FLAGS``, a user's own setting wins,
a reduction compiled after ``import gnncore`` is no YNNPACK fusion, and
``xla.REDUCTIONS_IN_XLA`` says which of the two is in force."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import pytest

from gnncore import xla

# prints whether the compiled sum is a YNNPACK fusion, what gnncore.xla says
# (None without gnncore) and the flags in force
_PROBE = """
import sys
said = None
if sys.argv[1] == "gnncore":
    from gnncore import xla
    said = xla.REDUCTIONS_IN_XLA
import os, jax, jax.numpy as jnp
text = jax.jit(lambda x: jnp.sum(x * 2.0, axis=-1)).lower(jnp.ones((4096, 16))).compile().as_text()
print("__ynn_fusion" in text, said, os.environ.get("XLA_FLAGS", ""))
"""


def _probe(mode: str, flags: str | None = None) -> tuple[bool, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_PLATFORMS"] = "cpu"
    if flags is not None:
        env["XLA_FLAGS"] = flags
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout.split(" ", 2)
    return out[0] == "True", out[1], out[2].strip()


def test_flags_are_appended_once_and_a_users_own_setting_wins():
    env = {}
    if jax.__version__ not in xla.TESTED_JAX:
        assert xla.request_cpu_flags(env) is False and env == {}
        pytest.skip(f"jax {jax.__version__}: gnncore sets no XLA flag")
    assert xla.request_cpu_flags(env) is True
    assert env["XLA_FLAGS"] == " ".join(xla.CPU_FLAGS)
    xla.request_cpu_flags(env)
    assert env["XLA_FLAGS"] == " ".join(xla.CPU_FLAGS), "a flag was appended twice"
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    xla.request_cpu_flags(env)
    assert env["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=4",
                                        *xla.CPU_FLAGS]
    mine = "--xla_cpu_experimental_ynn_fusion_type=reduce"
    env = {"XLA_FLAGS": mine}
    xla.request_cpu_flags(env)
    assert env["XLA_FLAGS"] == mine


def test_importing_gnncore_keeps_reductions_out_of_ynnpack():
    if jax.__version__ not in xla.TESTED_JAX:
        pytest.skip(f"jax {jax.__version__}: gnncore sets no XLA flag")
    plain, _, _ = _probe("plain")
    ours, said, flags = _probe("gnncore")
    assert not ours, "a reduction compiled after import gnncore is a YNNPACK fusion"
    assert said == "True", "gnncore.xla.REDUCTIONS_IN_XLA is False, but they are"
    assert xla.CPU_FLAGS[0] in flags
    # the check can fail: without the flag, this jax does fuse the reduction
    assert plain, "plain jax no longer fuses reductions into YNNPACK: is the flag still needed?"
    theirs, said, flags = _probe("gnncore", "--xla_cpu_experimental_ynn_fusion_type=reduce")
    assert theirs and flags == "--xla_cpu_experimental_ynn_fusion_type=reduce"
    assert said == "False", "REDUCTIONS_IN_XLA is True, but reductions went to YNNPACK"


@pytest.mark.parametrize("flags, native", [
    ("", False),
    ("--xla_force_host_platform_device_count=4", False),
    ("--xla_cpu_experimental_ynn_fusion_type=-reduce", True),
    ("--xla_force_host_platform_device_count=2 --xla_cpu_experimental_ynn_fusion_type=-reduce",
     True),
    ("--xla_cpu_experimental_ynn_fusion_type=-dot,-reduce", True),
    ("--xla_cpu_experimental_ynn_fusion_type=+reduce", False),
    ("--xla_cpu_experimental_ynn_fusion_type=reduce", False),
    # the last value of the option is the one XLA keeps
    ("--xla_cpu_experimental_ynn_fusion_type=-reduce "
     "--xla_cpu_experimental_ynn_fusion_type=+reduce", False),
])
def test_reductions_in_xla_reads_the_last_value_of_the_option(flags, native):
    assert xla.reductions_in_xla(flags) is native
