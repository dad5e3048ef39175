"""CPU benchmarks of gnncore against JraphX and PyG, and of the app in a browser.

Each script runs as a module from the repository root, e.g.
``python -m benchmarks.bench_layers --quick``; see ``benchmarks/README.md``.
Benchmark-only code: nothing in ``gnncore/``, ``explorer/`` or ``tests/`` imports it.
"""
