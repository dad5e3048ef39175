"""Side study: page faults per training step, with glibc malloc's defaults vs tuned.

XLA:CPU allocates every intermediate buffer with malloc and frees it after use.
Big buffers (an [E, F] message array is 25.6 MB for E = 100k, F = 64) can go
back to the kernel on every step, and the next step faults the pages in again.
This script times gnncore steps and counts minor page faults per step, in a
child process per malloc setting (the settings are read at process start).

Usage (from the repository root)::

    python -m benchmarks.page_faults [--shape random] [--steps 20] [--only gnncore,jraphx]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from benchmarks.common import REPO, print_table, shapes

SETTINGS = {
    "glibc defaults": {},
    "MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=2147483647 MALLOC_TRIM_THRESHOLD_=4294967295": {
        "MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "2147483647",
        "MALLOC_TRIM_THRESHOLD_": "4294967295"},
}


def child(shape: str, steps: int, frameworks: list[str], models: list[str]) -> None:
    import jax

    from benchmarks.bench_layers import runner

    g = shapes([shape])[0]
    out = []
    for fw in frameworks:
        for kind in models:
            r = runner(fw, kind, g)
            r.timed_step()
            for _ in range(3):
                jax.block_until_ready(r.step())
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            for _ in range(steps):
                jax.block_until_ready(r.step())
            wall = (time.perf_counter() - t0) / steps
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            out.append({"framework": fw, "model": kind, "ms": 1e3 * wall,
                        "faults": (r1.ru_minflt - r0.ru_minflt) / steps,
                        "sys_ms": 1e3 * (r1.ru_stime - r0.ru_stime) / steps,
                        "user_ms": 1e3 * (r1.ru_utime - r0.ru_utime) / steps})
    print("RESULT " + json.dumps(out))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="random")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--only", default="gnncore,jraphx")
    p.add_argument("--models", default="gcn,gat,sage")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    frameworks = args.only.split(",")
    models = args.models.split(",")
    if args.child:
        child(args.shape, args.steps, frameworks, models)
        return 0
    rows = []
    for name, extra in SETTINGS.items():
        env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
        env.update(extra)
        proc = subprocess.run([sys.executable, "-m", "benchmarks.page_faults", "--child",
                               "--shape", args.shape, "--steps", str(args.steps),
                               "--only", args.only, "--models", args.models],
                              cwd=REPO, env=env, capture_output=True, text=True, check=True)
        line = next(s for s in proc.stdout.splitlines() if s.startswith("RESULT "))
        for r in json.loads(line[len("RESULT "):]):
            rows.append([name, r["framework"], r["model"], f"{r['ms']:.1f}",
                         f"{r['faults']:.0f}", f"{r['sys_ms']:.1f}", f"{r['user_ms']:.1f}"])
    print_table(["malloc setting", "framework", "model", "wall ms/step",
                 "minor faults/step", "sys ms/step", "user ms/step"], rows,
                title=f"Page faults per training step, shape {args.shape}, "
                      f"{args.steps} steps (mean)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
