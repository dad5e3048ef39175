"""Side study: first-call time of gnncore training steps with JAX's persistent
compilation cache, cold (empty cache directory) vs warm (a second process).

Usage (from the repository root)::

    python -m benchmarks.compile_cache [--shape random] [--models gcn,gat,sage]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

from benchmarks.common import REPO, print_table, shapes


def child(cache_dir: str, shape: str, models: list[str]) -> None:
    import jax

    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import jax.numpy as jnp

    jax.block_until_ready(jax.jit(lambda a: a + 1)(jnp.ones(3)))  # start the backend
    from benchmarks.bench_layers import runner

    g = shapes([shape])[0]
    out = {}
    for kind in models:
        out[kind] = runner("gnncore", kind, g).timed_step()[0]
    print("RESULT " + json.dumps(out))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="random")
    p.add_argument("--models", default="gcn,gat,sage")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    models = args.models.split(",")
    if args.child:
        child(args.child, args.shape, models)
        return 0
    with tempfile.TemporaryDirectory() as cache:
        runs = []
        for _ in ("cold", "warm"):
            proc = subprocess.run([sys.executable, "-m", "benchmarks.compile_cache", "--child",
                                   cache, "--shape", args.shape, "--models", args.models],
                                  cwd=REPO, capture_output=True, text=True, check=True)
            line = next(s for s in proc.stdout.splitlines() if s.startswith("RESULT "))
            runs.append(json.loads(line[len("RESULT "):]))
    rows = [[args.shape, k, f"{runs[0][k]:.2f}", f"{runs[1][k]:.2f}"] for k in models]
    print_table(["shape", "model", "first call s, cold cache", "first call s, warm cache"],
                rows, title="gnncore first training step with jax_compilation_cache_dir")
    return 0


if __name__ == "__main__":
    sys.exit(main())
