"""Run logs: what :func:`explorer.watch` recorded, on disk, append-only.

A run is a folder ``<log dir>/<run name>/`` holding

- ``meta.json``: the schema version, the run's name, the step's name, when it
  started (written once, atomically);
- ``records.jsonl``: one JSON object a line, appended and flushed per recorded
  call: the call's numbers, its verdict, and ``changes_at`` (where its change
  vector is);
- ``changes-00001.npz``, ...: the per-variable change vectors (``‖Δ‖/‖θ‖``) of
  ``CHUNK`` records each (fewer when a loop is slow: at most ``CHUNK_S`` s
  behind), as one float32 matrix with the variables' paths and kinds, each
  chunk written to a temporary file and renamed into place.

So a log can be read while it is written, and after a crash mid-write it is
intact but for a torn last line, which the reader skips. Nothing here uses
pickle: ``.npz`` files are read with ``allow_pickle=False``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

__all__ = ["CHUNK", "SCHEMA_VERSION", "RunData", "RunLog", "list_runs", "read_run",
           "read_upload", "resolve_run", "runs_dir"]

SCHEMA_VERSION = 1
CHUNK = 16  # records per change-vector chunk
CHUNK_S = 5.0  # ... or fewer, when the oldest waiting record is this old (a slow loop)
MAX_RECORDS = 100_000  # a reader stops here (a log is never loaded without bound)
MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # an uploaded log, and each file in it, unpacked
ENV_RUNS = "EXPLORER_RUNS"
_MEMBER = re.compile(r"(?:[^/]+/)?(meta\.json|records\.jsonl|changes-\d{5}\.npz)")
_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(name: str) -> str:
    name = _NAME.sub("_", str(name)).strip("._") or "run"
    return name[:80]


class RunLog:
    """Writes one run's log; see the module's docstring."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._records = open(folder / "records.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._pending: list[tuple[int, list[float]]] = []
        self._pending_since = 0.0
        self._paths: list[str] | None = None
        self._kinds: list[str] = []
        self._chunks = 0
        self._count = 0

    @classmethod
    def create(cls, log_dir, name: str, *, step: str = "") -> RunLog:
        """A new run folder ``log_dir/<name>`` (``-2``, ``-3``... when taken)."""
        root = Path(log_dir)
        root.mkdir(parents=True, exist_ok=True)
        base = _safe(name)
        folder, n = root / base, 1
        while True:
            try:
                folder.mkdir()
                break
            except FileExistsError:
                n += 1
                folder = root / f"{base}-{n}"
        meta = {"schema": SCHEMA_VERSION, "name": folder.name, "step": step,
                "started": time.time(), "pid": os.getpid()}
        _write_atomic(folder / "meta.json", json.dumps(meta).encode())
        return cls(folder)

    def append(self, record, verdict, kinds: Mapping[str, str]) -> None:
        """Append one recorded call (an :class:`explorer.watcher.CallRecord`)
        with the verdict after it."""
        paths = sorted(kinds)
        if self._paths != paths:  # the variables changed: start a new chunk
            self._flush_chunk()
            self._paths, self._kinds = paths, [kinds[p] for p in paths]
        vector = [record.changes.get(p, math.nan) for p in paths]
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append((record.call, vector))
        line = {"call": record.call, "wall_s": record.wall_s, "traced": record.traced,
                "compiles": record.compiles, "cause": record.cause, "loss": record.loss,
                "nonfinite": list(record.nonfinite), "verdict": verdict.status,
                "evidence": list(verdict.evidence), "verdict_cause": verdict.cause,
                "fix": verdict.fix, "changes_at": self._chunks + 1}
        self._records.write(json.dumps(line, allow_nan=True) + "\n")
        self._records.flush()
        self._count += 1
        if len(self._pending) >= CHUNK or time.monotonic() - self._pending_since >= CHUNK_S:
            self._flush_chunk()

    def _flush_chunk(self) -> None:
        if not self._pending:
            return
        self._chunks += 1
        calls = np.asarray([c for c, _ in self._pending], np.int64)
        matrix = np.asarray([v for _, v in self._pending], np.float32).reshape(
            len(self._pending), len(self._paths or []))
        import io

        buffer = io.BytesIO()
        np.savez(buffer, calls=calls, changes=matrix, paths=np.asarray(self._paths, str),
                 kinds=np.asarray(self._kinds, str))
        _write_atomic(self.folder / f"changes-{self._chunks:05d}.npz", buffer.getvalue())
        self._pending = []

    def close(self, verdict=None) -> None:
        """Write what is pending and the final verdict (a last line)."""
        self._flush_chunk()
        if verdict is not None:
            self._records.write(json.dumps({"final": True, "verdict": verdict.status,
                                            "evidence": list(verdict.evidence),
                                            "verdict_cause": verdict.cause,
                                            "fix": verdict.fix}) + "\n")
        self._records.close()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ------------------------------------------------------------------ reading
@dataclasses.dataclass(frozen=True)
class RunData:
    """A run log as read: its meta data, the records (dicts), the final
    verdict if the run ended, and the change matrix (variables × recorded
    calls) of the chunks written so far."""

    name: str
    meta: dict
    records: tuple[dict, ...]
    final: dict | None
    paths: tuple[str, ...]
    kinds: tuple[str, ...]
    calls: tuple[int, ...]
    changes: np.ndarray  # [variables, calls]
    skipped: int  # unreadable lines (a torn last line)

    @property
    def verdict(self) -> dict | None:
        """The latest verdict: the final one, or the last record's."""
        if self.final is not None:
            return self.final
        return self.records[-1] if self.records else None


def read_run(folder) -> RunData:
    """Read a run folder; a torn or unreadable line is skipped and counted."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    if not isinstance(meta, dict) or meta.get("schema", SCHEMA_VERSION) > SCHEMA_VERSION:
        raise ValueError(f"{folder.name}: not a run log of schema {SCHEMA_VERSION}")
    records, final, skipped = [], None, 0
    try:
        with open(folder / "records.jsonl", encoding="utf-8", errors="replace") as f:
            for line in f:
                if len(records) >= MAX_RECORDS:
                    break
                try:
                    item = json.loads(line)
                except ValueError:
                    skipped += 1
                    continue
                if not isinstance(item, dict):
                    skipped += 1
                elif item.get("final"):
                    final = item
                else:
                    records.append(item)
    except OSError:
        pass
    paths, kinds, calls, blocks = (), (), [], []
    for chunk in sorted(folder.glob("changes-*.npz")):
        try:
            with np.load(chunk, allow_pickle=False) as data:
                chunk_paths = tuple(str(p) for p in data["paths"])
                if chunk_paths != paths:  # the variables changed: keep the newest set
                    paths, kinds = chunk_paths, tuple(str(k) for k in data["kinds"])
                    calls, blocks = [], []
                calls.extend(int(c) for c in data["calls"])
                blocks.append(np.asarray(data["changes"], np.float32))
        except (OSError, ValueError, KeyError):
            continue
    matrix = (np.concatenate(blocks).T if blocks else np.zeros((len(paths), 0), np.float32))
    return RunData(name=folder.name, meta=meta, records=tuple(records), final=final,
                   paths=paths, kinds=kinds, calls=tuple(calls), changes=matrix,
                   skipped=skipped)


def resolve_run(root, name: str) -> Path:
    """The folder of run ``name`` under ``root``: only a direct child of the
    root is allowed (no ``..``, no absolute path, no link out of it)."""
    root = Path(root).resolve()
    if not name or name != Path(name).name or name in (".", ".."):
        raise ValueError(f"run {name!r}: not a run name")
    folder = (root / name).resolve()
    if folder.parent != root or not folder.is_dir():
        raise ValueError(f"run {name!r}: no such run under {root}")
    return folder


def list_runs(root) -> list[str]:
    """The runs under ``root``, newest first (empty when there is none)."""
    root = Path(root)
    if not root.is_dir():
        return []
    runs = [p for p in root.iterdir() if p.is_dir() and (p / "records.jsonl").exists()
            and p.resolve().parent == root.resolve()]
    return [p.name for p in sorted(runs, key=lambda p: p.stat().st_mtime, reverse=True)]


def runs_dir(argv=None, environ=None) -> Path:
    """Where the app's "Your runs" page looks: ``--runs DIR`` on the app's
    command line (``streamlit run streamlit_app.py -- --runs DIR``), else the
    environment variable ``EXPLORER_RUNS``, else ``./runs``."""
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    environ = os.environ if environ is None else environ
    for i, arg in enumerate(argv):
        if arg == "--runs" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if arg.startswith("--runs="):
            return Path(arg.split("=", 1)[1])
    return Path(environ.get(ENV_RUNS) or "runs")


def read_upload(filename: str, data: bytes) -> RunData:
    """A run log someone uploaded: a ``.zip`` of a run folder (its
    ``meta.json``, ``records.jsonl`` and ``changes-*.npz``, nothing else is
    read) or a bare ``records.jsonl``. Raises ``ValueError`` naming what is
    wrong; sizes are checked from the zip's directory before anything is
    unpacked."""
    import io
    import tempfile
    import zipfile

    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(f"{filename}: larger than {MAX_UPLOAD_BYTES // 2**20} MB")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / _safe(Path(filename).stem)
        folder.mkdir()
        if filename.lower().endswith(".jsonl"):
            (folder / "records.jsonl").write_bytes(data)
        elif filename.lower().endswith(".zip"):
            try:
                archive = zipfile.ZipFile(io.BytesIO(data))
                members = archive.infolist()
            except (zipfile.BadZipFile, ValueError) as err:
                raise ValueError(f"{filename}: not a zip file ({err})") from None
            if len(members) > 10_000:
                raise ValueError(f"{filename}: {len(members)} files, too many for a run log")
            total = 0
            for info in members:
                match = _MEMBER.fullmatch(info.filename)
                if match is None or info.is_dir():
                    continue  # only the run log's own files are read
                total += info.file_size
                if info.file_size > MAX_UPLOAD_BYTES or total > MAX_UPLOAD_BYTES:
                    raise ValueError(f"{filename}: {info.filename} unpacks to more than "
                                     f"{MAX_UPLOAD_BYTES // 2**20} MB")
                (folder / match.group(1)).write_bytes(archive.read(info))
            if not (folder / "records.jsonl").exists():
                raise ValueError(f"{filename}: no records.jsonl in the archive")
        else:
            raise ValueError(f"{filename}: upload a .zip of a run folder or its records.jsonl")
        run = read_run(folder)
    if not run.records and run.final is None:
        raise ValueError(f"{filename}: no records could be read")
    return run
