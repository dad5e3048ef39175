"""Shared test settings: CPU only, fast compiles, shared-dataset location."""

import gc
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The tests compile hundreds of small programs and run each a few times, so
# XLA's optimisation passes cost more than they save (about a sixth of the
# suite's time). Results are the same programs, unoptimised; the benchmarks,
# the app itself and the app server of the two-device browser test keep full
# optimisation (app_environ). Set JAX_DISABLE_MOST_OPTIMIZATIONS=0 to test the
# optimised path.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# For the same reason, XLA's older CPU code generator for fused loops: it
# compiled the test programs about 40 % faster than the default fusion
# emitters (tests/gnncore/test_sparse.py: 217 s -> 145 s on 2 cores), with the
# same results. And one LLVM module per program, not several compiled on
# parallel threads: on 2 cores, with two workers, the threads only add their
# overhead (test_sparse.py and test_dense_reference.py, alone: 102.6 -> 89.1
# CPU-s). Subprocesses that set their own XLA_FLAGS keep both through
# xla_flags(); app_environ(as_users_run_it=True) drops them, with the optimisations.
FAST_COMPILE_FLAGS = ("--xla_cpu_use_fusion_emitters=false",
                      "--xla_cpu_parallel_codegen_split_count=1")
for _flag in FAST_COMPILE_FLAGS:
    if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}".strip()

import pytest  # noqa: E402

from explorer import compile_cache  # noqa: E402
from explorer.lessons import rehearsal  # noqa: E402

# JAX's persistent compilation cache, as the app uses it, in a directory of this
# test session's own (never the user's ~/.cache): the first compile of a program
# is cold, as on a new machine; the same program compiled again by a later test,
# by the other xdist worker (JAX's cache key includes the directory, so only a
# shared one answers across workers) or by the app server a browser test starts
# is read back. Tests that check what a lesson compiles count this process's
# cache misses, not the directory's files, which the other worker also writes.
_ROOT = "EXPLORER_TEST_CACHE_ROOT"  # set by the session's first process that gets here
if compile_cache.ENV not in os.environ or _ROOT in os.environ:
    _root = os.environ.get(_ROOT)
    if _root is None:
        import atexit
        import shutil
        import tempfile

        _root = tempfile.mkdtemp(prefix="explorer-test-jax-cache-")
        atexit.register(shutil.rmtree, _root, ignore_errors=True)
        os.environ[_ROOT] = _root
    _cache = Path(_root) / "jax"
    _cache.mkdir(exist_ok=True)
    os.environ[compile_cache.ENV] = str(_cache)
compile_cache.enable()


def _wrap_once(module: str, name: str, wrap) -> None:
    """Replace the function ``module.name`` with ``wrap(original)``, once per
    process. A library's private hook: if the module or the function has
    moved, nothing is replaced and the tests run as before."""
    import importlib

    try:
        owner = importlib.import_module(module)
    except ImportError:  # pragma: no cover - depends on the library's layout
        return
    original = getattr(owner, name, None)
    if original is None or getattr(original, "wrapped_by_tests", False):
        return
    replacement = wrap(original)
    replacement.wrapped_by_tests = True
    setattr(owner, name, replacement)


def _shared_mlir_contexts(make, uses: int = 256):
    """JAX's ``make_ir_context``, letting ``uses`` lowerings in a row share
    one MLIR context.

    JAX makes a new MLIR context for every program it lowers, and loads its
    dialects into it: about 4 ms each, and the suite lowers thousands of small
    programs (every jit of a new shape, every eager operation on one). The
    programs are the same in a shared context, only built faster; and the
    processes stay smaller (``tests/gnncore/test_dense_reference.py`` and
    ``test_conv_attention.py`` alone, ``-n 0``: 46-49 s and 1.66 GB at most
    without, 40-42 s and 0.73 GB with; what JAX keeps of its compiled programs
    seems to keep their contexts alive). A new context every ``uses``
    lowerings bounds what one context holds (uniqued constants and
    locations)."""
    held = {"context": None, "left": 0}

    def shared_context():
        if held["left"] <= 0:
            held["context"], held["left"] = make(), uses
        held["left"] -= 1
        return held["context"]

    return shared_context


def _one_component_scan(scan):
    """Streamlit's scan of the installed packages for its components, done
    once per test process.

    Every new ``AppTest`` makes its own component manager, which reads the
    metadata of every installed package (about 160 here) looking for Streamlit
    components: 0.16-0.31 s each, and the AppTest files make 81 AppTests
    (alone, ``-n 0``: 111.7-115.4 CPU-s with a scan each, 84.1-89.4 with
    one). A server scans once, when it starts. The installed packages do not
    change while the tests run (the packaging test installs into a venv of
    its own), so one scan's answer holds for every AppTest; each gets its own
    list."""
    found = []

    def scan_once(*args, **kwargs):
        if not found:
            found.append(scan(*args, **kwargs))
        return list(found[0])

    return scan_once


def _woken_not_polling(_poll):
    """AppTest's wait for a script run, woken by the run's end instead of
    polling for it.

    Streamlit's ``require_widgets_deltas`` wakes every millisecond and scans
    every event of the run so far (one per element sent) for the end. Each
    wake takes the GIL from the script thread, which is doing the work: in
    ``tests/app/test_app.py`` the poll walked the event lists 1.3 million
    times. This waits on the runner's own event signal, with the same timeout,
    and on a timeout stops the run and raises the original's error."""
    import threading

    from streamlit.runtime.scriptrunner import ScriptRunnerEvent

    def require_widgets_deltas(runner, timeout: float = 3) -> None:
        ended = threading.Event()

        def on_event(sender, event, **kwargs):
            if event == ScriptRunnerEvent.SHUTDOWN:
                ended.set()

        runner.on_event.connect(on_event, weak=False)
        try:
            if runner.script_stopped() or ended.wait(timeout):
                return
        finally:
            runner.on_event.disconnect(on_event)
        runner.request_stop()  # as the original does when its time is up
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")

    return require_widgets_deltas


_wrap_once("jax._src.interpreters.mlir", "make_ir_context", _shared_mlir_contexts)

# No background rehearsals of the next lesson (explorer/lessons/rehearsal.py):
# they would compile beside every lesson test; tests that want them say so.
os.environ.setdefault(rehearsal.ENV, "0")


def xla_flags(*extra: str) -> str:
    """``XLA_FLAGS`` for a test's subprocess: this session's, plus ``extra``."""
    return " ".join([os.environ.get("XLA_FLAGS", ""), *extra]).strip()


def app_environ(*, as_users_run_it: bool = False, **extra: str) -> dict[str, str]:
    """The environment of an app server a test starts, with ``extra``.

    By default it keeps this session's compile settings: they change how long
    XLA takes to compile a step (the servers of ``test_browser.py`` and
    ``test_browser_canvas.py`` compile one per mode, graph and model they are
    shown), not what the page shows, which is what a browser test checks; it
    took ``test_browser.py`` from 96-110 s to 81-83 s, alone on 2 cores. The
    programs it compiles are then the ones the tests compile in-process, so the
    worker's compilation cache can answer. ``as_users_run_it``: XLA's defaults,
    as ``streamlit run`` has them (the two-device browser test keeps them, so
    CI still drives the optimised path in a real browser)."""
    env = dict(os.environ, **extra)
    if not as_users_run_it:
        return env
    env.pop("JAX_DISABLE_MOST_OPTIMIZATIONS", None)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if f not in FAST_COMPILE_FLAGS]
    if flags:
        env["XLA_FLAGS"] = " ".join(flags)
    else:
        env.pop("XLA_FLAGS", None)
    return env


REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"


def xla_compiles(action) -> int:
    """How many XLA compilations ``action()`` caused (JAX's own monitoring
    events; a program read back from the compilation cache is not one)."""
    return _jax_events(action, "/jax/core/compile/backend_compile_duration", timed=True)


def lowerings(action) -> int:
    """How many programs ``action()`` lowered to XLA: every jit or eager
    operation of a new shape, whether the compilation cache then answers or not
    (so another test's or worker's compiles cannot hide one)."""
    return _jax_events(action, "/jax/core/compile/jaxpr_to_mlir_module_duration", timed=True)


def cache_misses(action) -> int:
    """How many compiles in this process ``action()`` looked up in the
    compilation cache without finding them (the workers share one cache
    directory, so its listing also grows with the other worker's compiles)."""
    return _jax_events(action, "/jax/compilation_cache/cache_misses", timed=False)


def _jax_events(action, name: str, *, timed: bool) -> int:
    """How many of JAX's monitoring events ``name`` ``action()`` recorded."""
    from jax import monitoring

    events = []

    def listen(event, *args, **kwargs):
        if event == name:
            events.append(event)

    register, unregister = ((monitoring.register_event_duration_secs_listener,
                             monitoring.unregister_event_duration_listener) if timed else
                            (monitoring.register_event_listener,
                             monitoring.unregister_event_listener))
    register(listen)
    try:
        action()
    finally:
        unregister(listen)
    return len(events)


def svg_charts(at) -> list[str]:
    """The SVG markup of every chart an AppTest page draws with
    ``explorer.ui.common.svg_chart`` (the train panel's, a lesson's)."""
    import json

    return [json.loads(c.proto.json)[0] for c in at.get("bidi_component")
            if c.proto.component_name == "gnn_explorer.svg"]


@pytest.fixture
def cora_path():
    path = SHARED_DATASETS / "cora.npz"
    if not path.exists():
        pytest.skip("../shared/datasets/cora.npz is not available")
    return path


# The suite runs on two xdist workers, one test file at a time each
# (``--dist loadfile``). xdist hands out files in the order below, and
# ``--no-loadscope-reorder`` (pyproject.toml) keeps it: the longest files first,
# so that the last file a worker takes is a short one and neither worker waits
# long for the other at the end. By default xdist orders files by their number
# of tests, which ran both browser files (100 s each) last on one worker while
# the other stood idle for a minute. Seconds per file on 2 cores, from
# ``pytest -v --durations=0`` (one run on 2026-12-06, a fresh clone: 463 s);
# files not listed (each under 11 s) follow, in collection order.
LONGEST_FILES = (
    "app/test_browser_canvas.py",  # 121
    "app/test_browser.py",  # 109
    "app/test_app.py",  # 56
    "explorer/test_engine.py",  # 47
    "gnncore/test_sparse.py",  # 45
    "explorer/test_export.py",  # 33
    "gnncore/test_dense_reference.py",  # 28
    "explorer/test_workspace.py",  # 28
    "explorer/test_compile_cache.py",  # 28
    "explorer/test_graph_task.py",  # 28
    "app/test_lessons.py",  # 25
    "gnncore/test_jit.py",  # 23
    "explorer/test_memory.py",  # 23
    "explorer/test_devices.py",  # 22
    "gnncore/test_jraphx_diff.py",  # 21
    "app/test_lesson_rehearsal.py",  # 19
    "gnncore/test_conv_mlp.py",  # 15
    "gnncore/test_batch.py",  # 15
    "gnncore/test_conv_attention.py",  # 15
    "app/test_browser_devices.py",  # 15
    "test_project.py",  # 14
    "explorer/test_check.py",  # 13
    "gnncore/test_conv_spectral.py",  # 13
    "explorer/test_cli.py",  # 12
    "gnncore/test_norm_pool.py",  # 11
)


def pytest_collection_modifyitems(config, items):
    """Longest files first (see ``LONGEST_FILES``); a stable sort, so the tests
    of one file keep their order."""
    tests = Path(__file__).parent
    gone = [name for name in LONGEST_FILES if not (tests / name).is_file()]
    if gone:
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FILES names missing files: {gone}")
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}

    def file_rank(item):
        try:
            name = item.path.relative_to(tests).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(name, len(rank))

    items.sort(key=file_rank)


def pytest_collection_finish(session):
    """Set aside for good what importing JAX, Flax, Streamlit and the test
    modules made (``gc.freeze``): Python's full collections, which ran about 50
    times a worker, then no longer walk those objects again each time (they
    took 17-27 s a worker in a full run; the objects live to the end anyway).

    And, where the collected test modules imported Streamlit (not before: the
    import costs a process that runs no app test, such as xdist's controller,
    about 0.6 s), its component scan done once (:func:`_one_component_scan`)."""
    if "streamlit" in sys.modules:
        _wrap_once("streamlit.components.v2.manifest_scanner", "scan_component_manifests",
                   _one_component_scan)
        _wrap_once("streamlit.testing.v1.local_script_runner", "require_widgets_deltas",
                   _woken_not_polling)
    gc.collect()
    gc.freeze()


def pytest_sessionfinish(session):
    """The same for everything still alive at the end: pytest's last sweep for
    unraisable exceptions (five full collections) then skips what the session
    made; about 4 s a worker with JAX's caches full."""
    gc.freeze()
