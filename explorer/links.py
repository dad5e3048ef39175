"""Shareable links: a run's settings and its drawn graph as URL query parameters.

``encode`` writes only what differs from the defaults, readably
(``?mode=jax.jit&layers=gcn-16,gat-8-h4&seed=3``); a drawn or uploaded graph
travels compactly in ``g`` (zlib-compressed JSON, base64url). ``decode`` never
raises: anything over-long, unknown or tampered falls back to the default and
is reported in ``notices``. Nothing is evaluated or unpickled.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
import math
import zlib
from collections.abc import Mapping

from explorer.config import LIMITS, ConfigError, LayerConfig, RunConfig
from explorer.drawing import Drawing
from explorer.engine.tasks import task_for
from explorer.graphio import MAX_LABEL
from explorer.lessons import key_of as lesson_key
from explorer.sources import FEATURES

__all__ = ["MAX_GRAPH_CHARS", "MAX_LINK_CHARS", "Link", "decode", "encode", "graph_blob"]

MAX_LINK_CHARS = 8000  # every parameter together; a longer link is ignored
MAX_GRAPH_BYTES = 200_000  # the graph blob once decompressed
# a linked graph is laid out on arrival (spring): keep it small, whatever size
# a drawing may hold (explorer.drawing.MAX_NODES)
MAX_LINK_NODES = 2000
# the graph's share of a link: the rest is room for the settings
MAX_GRAPH_CHARS = MAX_LINK_CHARS - 1000
_DEFAULTS = RunConfig()
_SCALARS = [f.name for f in dataclasses.fields(RunConfig) if f.name != "layers"]
SHOWN_CHARS = 40  # of a parameter's name or value, in a notice

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Link:
    """What a link holds."""

    config: RunConfig
    drawing: Drawing | None = None  # None: the config's preset graph
    classroom: bool = False
    notices: tuple[str, ...] = ()
    lesson: str | None = None  # a lesson key (explorer.lessons), opened on arrival
    present: bool = False  # presenter view: sidebar collapsed, larger type


# ------------------------------------------------------------------ layers
def _parse_layers(text: str, notices: list[str]) -> tuple[LayerConfig, ...]:
    """``gcn-16,gat-8-h4`` as layers (:meth:`LayerConfig.parse_stack`); a width
    or head count outside :data:`explorer.config.LIMITS` is clamped with a
    notice."""
    layers = []
    for layer in LayerConfig.parse_stack(text):
        shown = layer.format()[:SHOWN_CHARS]
        options = dict(layer.options)
        width = _clamped(f"layers width of {shown!r}", layer.width, "width", notices)
        if "heads" in options:
            options["heads"] = _clamped(f"layers heads of {shown!r}", options["heads"], "heads",
                                        notices)
        layers.append(LayerConfig(layer.kind, width, options))
    return tuple(layers)


def _clamped(what: str, value, limit: str, notices: list[str]):
    """``value`` within ``LIMITS[limit]``, with a notice when it was not."""
    bound = LIMITS[limit]
    if bound.contains(value):
        return value
    kept = bound.clamp(value)
    side = "below" if value < bound.low else "above"
    notices.append(f"link parameter {what}: {_number(value)} is {side} the limit "
                   f"({bound.describe()}), {_number(kept)} used")
    return kept


def _number(x) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


# ------------------------------------------------------------------- graph
def graph_blob(drawing: Drawing) -> str | None:
    """The ``g`` parameter for ``drawing``, or ``None`` when it does not fit in a
    link (over :data:`MAX_LINK_NODES` nodes, decided before encoding anything,
    or over :data:`MAX_GRAPH_CHARS` once encoded): such a link carries the
    settings only."""
    if drawing.num_nodes > MAX_LINK_NODES:
        return None
    blob = _graph_blob(drawing)
    return blob if len(blob) <= MAX_GRAPH_CHARS else None


def _graph_blob(drawing: Drawing) -> str:
    data = {"n": drawing.num_nodes, "e": [list(e) for e in drawing.edges],
            "y": list(drawing.labels)}
    if drawing.names != tuple(str(i) for i in range(drawing.num_nodes)):
        data["names"] = list(drawing.names)
    if drawing.directed:
        data["d"] = 1
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def _parse_graph(blob: str, seed: int) -> Drawing:
    try:
        packed = base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4))
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, MAX_GRAPH_BYTES)
        if inflater.unconsumed_tail:
            raise ValueError("the graph is too large for a link")
        data = json.loads(raw)
    except RecursionError:
        raise ValueError("the graph blob is nested too deeply") from None
    except (binascii.Error, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"the graph blob is not valid ({type(err).__module__}."
                         f"{type(err).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError("the graph must be a JSON object")
    n = data.get("n")
    if not isinstance(n, int) or not 1 <= n <= MAX_LINK_NODES:
        raise ValueError(f"the graph needs 1 to {MAX_LINK_NODES} nodes")
    names = data.get("names", [str(i) for i in range(n)])
    labels = data.get("y", [-1] * n)
    edges = data.get("e", [])
    if (not isinstance(names, list) or len(names) != n or len(set(map(str, names))) != n
            or not isinstance(labels, list) or len(labels) != n
            or not all(isinstance(v, int) and -1 <= v <= MAX_LABEL for v in labels)):
        raise ValueError("the graph's names or labels do not match its node count")
    if not isinstance(edges, list) or not all(
            isinstance(e, list) and len(e) == 2
            and all(isinstance(v, int) and 0 <= v < n for v in e) for e in edges):
        raise ValueError("the graph's edges must be pairs of node indices")
    drawing = Drawing(names=tuple(map(str, names)), labels=tuple(labels),
                      positions=(None,) * n, directed=bool(data.get("d", 0)))
    for u, v in edges:
        drawing = drawing.add_edge(u, v)
    return drawing.layout("spring", seed=seed)


# ------------------------------------------------------------------ public
def encode(config: RunConfig, drawing: Drawing | None = None, *,
           classroom: bool = False, lesson: str | None = None,
           present: bool = False) -> dict[str, str]:
    """Query parameters for ``config`` (only non-default fields) and, when
    given, the drawn graph (``drawing``: anything that is not the preset;
    left out when it does not fit, see :func:`graph_blob`) and the open
    lesson's key."""
    params: dict[str, str] = {}
    for name in _SCALARS:
        value = getattr(config, name)
        if value != getattr(_DEFAULTS, name):
            params[name] = (("1" if value else "0") if isinstance(value, bool)
                            else str(value))
    if config.layers != _DEFAULTS.layers:
        params["layers"] = ",".join(la.format() for la in config.layers)
    if drawing is not None:
        blob = graph_blob(drawing)
        if blob is not None:
            params["g"] = blob
    if classroom:
        params["classroom"] = "1"
    if lesson:
        params["lesson"] = lesson
    if present:
        params["present"] = "1"
    return params


def decode(params: Mapping[str, str]) -> Link:
    """The link's config, graph and classroom flag. Never raises: a bad or
    unknown parameter is dropped (its default is used) with a notice, a number
    outside :data:`explorer.config.LIMITS` is clamped with a notice, and a link
    that cannot be read at all gives the defaults with a notice. Notices are
    plain text holding what the link said: show them as text, never markdown."""
    try:
        return _decode(params)
    except Exception as err:  # a bug must not take the page down: defaults
        log.exception("link could not be read")
        return Link(RunConfig(), notices=(
            f"the link could not be read ({type(err).__name__}): default settings used",))


def _decode(params: Mapping[str, str]) -> Link:
    params = {str(k): str(v) for k, v in params.items()}
    notices: list[str] = []
    if sum(len(k) + len(v) for k, v in params.items()) > MAX_LINK_CHARS:
        return Link(RunConfig(), notices=(
            f"the link is longer than {MAX_LINK_CHARS} characters: default settings used",))
    known = set(_SCALARS) | {"layers", "g", "classroom", "lesson", "present"}
    for name in sorted(set(params) - known):
        notices.append(f"unknown link parameter {name[:SHOWN_CHARS]!r} ignored")
    data = RunConfig().to_dict()
    for name in _SCALARS:
        if name not in params:
            continue
        default, text = getattr(_DEFAULTS, name), params[name]
        try:
            if isinstance(default, bool):
                if text not in ("0", "1", "true", "false"):
                    raise ValueError("must be 0 or 1")
                data[name] = text in ("1", "true")
            elif isinstance(default, int):
                data[name] = int(text)
            elif isinstance(default, float):
                value = float(text)
                if not math.isfinite(value):
                    raise ValueError("must be a finite number")
                data[name] = value
            else:
                data[name] = text
        except ValueError as err:
            notices.append(f"link parameter {name}={text[:SHOWN_CHARS]!r} ignored: "
                           f"{str(err)[:80]}")
            continue
        if name in LIMITS:
            data[name] = _clamped(name, data[name], name, notices)
    if "layers" in params:
        try:
            data["layers"] = [{"kind": la.kind, "width": la.width, "options": dict(la.options)}
                              for la in _parse_layers(params["layers"], notices)]
        except ConfigError as err:
            notices.append(f"link parameter layers ignored: {err.message}")
    # Validate together; a field the config refuses goes back to its default.
    for _ in range(len(data) + 1):
        try:
            config = RunConfig.from_dict(data)
            break
        except ConfigError as err:
            field = err.field.split("[")[0].split(".")[0]
            features = data.get("features")
            usable = task_for(str(data.get("graph"))).usable_features(str(features))
            if field == "features" and features in FEATURES and usable != features:
                data["features"] = usable  # node ids mean nothing across graphs
                continue
            if field not in data or data[field] == RunConfig().to_dict()[field]:
                notices.append(f"link settings ignored ({err}): default settings used")
                config = RunConfig()
                break
            notices.append(f"link parameter {field} ignored: {err}")
            data[field] = RunConfig().to_dict()[field]
    else:  # pragma: no cover - every pass resets one field
        config = RunConfig()
    drawing = None
    if "g" in params:
        if not config.task.editable:
            notices.append("a drawn graph cannot go with a graph-classification dataset: "
                           "graph ignored")
        else:
            try:
                drawing = _parse_graph(params["g"], config.seed)
            except ValueError as err:
                notices.append(f"link graph ignored: {err}")
    lesson = None
    if "lesson" in params:
        lesson = lesson_key(params["lesson"])
        if lesson is None:
            notices.append(f"unknown lesson {params['lesson'][:SHOWN_CHARS]!r} ignored")
    return Link(config, drawing, params.get("classroom") in ("1", "true"), tuple(notices),
                lesson, params.get("present") in ("1", "true"))
