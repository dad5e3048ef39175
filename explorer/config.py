"""One declarative, serialisable description of a run.

The UI edits a :class:`RunConfig`, the URL and exported scripts serialise it,
and the engine consumes it. ``to_dict``/``from_dict`` round-trip through plain
JSON types; ``from_dict`` validates every field and names the bad one.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from explorer.sources import FEATURES, GRAPH_TASKS, PRESETS
from gnncore import ACTIVATIONS, CONV_TYPES, NORMS, POOLS

if TYPE_CHECKING:
    from explorer.engine.steppers import Stepper
    from explorer.engine.tasks import Task

__all__ = ["LAYER_AGGRS", "LIMITS", "Bound", "ConfigError", "LayerConfig", "RunConfig"]

@dataclasses.dataclass(frozen=True)
class Bound:
    """The allowed range of one number in a run's settings, both ends included."""

    low: float
    high: float
    integer: bool = False

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        return f"{kind} from {_num(self.low)} to {_num(self.high)}"

    def contains(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.integer and not isinstance(value, int):
            return False
        return self.low <= value <= self.high  # NaN compares false: refused

    def clamp(self, value):
        """The nearest allowed value (``value`` must be a number, not NaN)."""
        value = min(max(value, self.low), self.high)
        return int(value) if self.integer else float(value)


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


#: The one set of limits on a run's numbers: :class:`RunConfig` refuses what is
#: outside them, and the UI's widgets, links, the CLI and config files all read
#: them from here. ``layers`` bounds the number of conv layers, ``width`` and
#: ``heads`` every layer's. The learning rate goes far above any useful value on
#: purpose: a class can watch a run diverge (training stops at the first NaN).
LIMITS: Mapping[str, Bound] = {
    "difficulty": Bound(0.0, 1.0),
    "dropout": Bound(0.0, 0.9),
    "learning_rate": Bound(1e-6, 1e12),
    "weight_decay": Bound(0.0, 1.0),
    "seed": Bound(0, 2**32 - 1, integer=True),  # numpy's and networkx's seeds are 32-bit
    "epochs": Bound(1, 100_000, integer=True),
    "train_per_class": Bound(1, 1000, integer=True),
    "layers": Bound(1, 8, integer=True),
    "width": Bound(1, 1024, integer=True),
    "heads": Bound(1, 8, integer=True),
    "scan_steps": Bound(1, 1000, integer=True),
    "devices": Bound(1, 64, integer=True),
}


class ConfigError(ValueError):
    """A setting refused by :class:`RunConfig` (or a layer text refused by
    :meth:`LayerConfig.parse`); ``field`` names it, e.g. ``layers[1].width``."""

    def __init__(self, field: str, message: str):
        super().__init__(f"config field '{field}': {message}")
        self.field, self.message = field, message


#: the neighbour aggregations a layer can choose (``sage-16-max``; the model panel)
LAYER_AGGRS = ("mean", "max", "sum", "min")


@dataclasses.dataclass(frozen=True)
class LayerConfig:
    """One conv layer: its kind (``gcn``/``gat``/``sage``/``gin``), output width
    and conv options (e.g. ``{"heads": 4}``).

    As text (links write ``-``, the CLI ``:``): ``kind<sep>width``, then
    ``h<heads>`` and an aggregation, e.g. ``gat-8-h4`` or ``sage:16:max``.
    """

    kind: str = "gcn"
    width: int = 16
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def format(self, sep: str = "-") -> str:
        parts = [self.kind, str(self.width)]
        if "heads" in self.options:
            parts.append(f"h{int(self.options['heads'])}")
        if "aggr" in self.options:
            parts.append(str(self.options["aggr"]))
        return sep.join(parts)

    @classmethod
    def parse(cls, text: str, sep: str = "-", *,
              default_width: int | None = None) -> LayerConfig:
        """The layer ``text`` writes (see the class); ``default_width`` is used
        when the text has none (else a width is required). Raises
        :class:`ConfigError` (``layers``) naming the part that is wrong. The
        numbers are not checked against :data:`LIMITS` here: a
        :class:`RunConfig` checks them (links clamp them first)."""
        bits = [b.strip() for b in str(text).strip().split(sep)]
        example = sep.join(("gcn", "16")) + " or " + sep.join(("gat", "8", "h4"))
        if len(bits) == 1 and default_width is not None:
            bits.append(str(default_width))
        if len(bits) < 2 or not bits[1].isdigit():
            raise ConfigError("layers", f"bad layer {text!r}: write kind{sep}width, e.g. "
                                        f"{example}")
        options: dict = {}
        for extra in bits[2:]:
            if extra.startswith("h") and extra[1:].isdigit():
                options["heads"] = int(extra[1:])
            elif extra in LAYER_AGGRS:
                options["aggr"] = extra
            else:
                raise ConfigError("layers", f"bad layer {text!r}: unknown option {extra!r}")
        return cls(bits[0], int(bits[1]), options)

    @classmethod
    def parse_stack(cls, text: str, sep: str = "-", *,
                    default_width: int | None = None) -> tuple[LayerConfig, ...]:
        """Comma-separated layers, e.g. ``gcn-16,gat-8-h4``; more than
        ``LIMITS["layers"]`` refuse the whole text."""
        parts = str(text).split(",")
        count = LIMITS["layers"]
        if len(parts) > count.high:
            raise ConfigError("layers", f"{len(parts)} layers, at most {count.high}")
        return tuple(cls.parse(p, sep, default_width=default_width) for p in parts)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run (same config + seed → same losses).

    Arguments:
        graph: a preset name (``karate`` by default; see ``explorer.sources.PRESETS``)
            or a graph-classification dataset (``explorer.sources.GRAPH_TASKS``:
            then every graph is classified, with a pooled readout and a head).
        difficulty: 0 (easy) to 1, for the synthetic presets.
        features: node features, one of ``explorer.sources.FEATURES``;
            ``file`` is the graph's own (Cora's word vectors). Only the presets
            with a data file have them: the config cannot tell, loading the
            graph raises ``ValueError`` for the others. Each preset's usual
            choice is ``PRESETS[graph].default_features`` (the CLI's default).
        layers: the conv stack; the last layer's width is replaced by the number
            of classes unless ``head`` is set.
        activation, dropout, batch_norm, residual, head: see ``gnncore.GNN``.
        optimizer: ``adam``, ``adamw`` or ``sgd``; ``learning_rate``,
            ``weight_decay``.
        mode: one of ``explorer.engine.STEPPERS``.
        seed: initial weights, dropout stream and split.
        epochs: training steps of a full run.
        train_per_class: labelled training nodes per class.
        bucket_padding: pad nodes and edges up to power-of-two buckets, so that
            editing the graph within a bucket does not recompile.
        pool: the readout of graph-classification datasets (mean/sum/max/min).
        norm: the kind of norm ``batch_norm`` adds: ``batch``, ``layer`` or ``graph``.
        scan_steps: training steps per compiled call in the ``scan`` mode (its
            ``jax.lax.scan`` length K); the other modes ignore it.
        devices: train on the first N devices (``explorer.engine.sharding``:
            the inputs split over a ``data`` mesh, the model replicated, XLA
            adding the communication). On CPU, more than one device exists only
            when ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` is set
            before JAX starts; a run asking for more than exist is refused.
    """

    graph: str = "karate"
    difficulty: float = 0.0
    features: str = "one_hot"
    layers: tuple[LayerConfig, ...] = (LayerConfig("gcn", 16), LayerConfig("gcn", 16))
    activation: str = "relu"
    dropout: float = 0.5
    batch_norm: bool = False
    residual: bool = False
    head: bool = False
    optimizer: str = "adam"
    learning_rate: float = 0.01
    weight_decay: float = 5e-4
    mode: str = "nnx.jit"
    seed: int = 0
    epochs: int = 100
    train_per_class: int = 4
    bucket_padding: bool = False
    pool: str = "mean"
    norm: str = "batch"
    scan_steps: int = 10
    devices: int = 1

    @property
    def task(self) -> type[Task]:
        """What is classified: ``explorer.engine.NodeTask`` (the nodes of one
        graph) or ``GraphTask`` (the graphs of a dataset)."""
        from explorer.engine.tasks import task_for  # the engine imports this module

        return task_for(self.graph)

    @property
    def stepper(self) -> type[Stepper]:
        """How the config's JIT mode runs the step (``explorer.engine.STEPPERS``)."""
        from explorer.engine.steppers import STEPPERS

        return STEPPERS[self.mode]

    def __post_init__(self):
        from explorer.engine.optimizers import OPTIMIZERS
        from explorer.engine.steppers import STEPPERS

        _check(self.graph in PRESETS or self.graph in GRAPH_TASKS, "graph",
               f"choose one of {sorted(PRESETS)} or a dataset {sorted(GRAPH_TASKS)}")
        _check(self.features in FEATURES, "features", f"choose one of {FEATURES}")
        kinds = self.task.feature_kinds
        _check(self.features in kinds, "features",
               f"a {self.task.kind}-classification task needs one of {kinds}")
        _check(self.pool in POOLS, "pool", f"choose one of {tuple(POOLS)}")
        _check(self.norm in NORMS, "norm", f"choose one of {tuple(NORMS)}")
        count = LIMITS["layers"]
        _check(isinstance(self.layers, tuple) and count.contains(len(self.layers)), "layers",
               f"needs {count.low} to {count.high} layers")
        for i, layer in enumerate(self.layers):
            _check(isinstance(layer, LayerConfig), f"layers[{i}]", "must be a LayerConfig")
            _check(layer.kind in CONV_TYPES, f"layers[{i}].kind",
                   f"choose one of {sorted(CONV_TYPES)}")
            _in_limits(f"layers[{i}].width", layer.width, "width")
            if "heads" in layer.options:
                _in_limits(f"layers[{i}].heads", layer.options["heads"], "heads")
        _check(self.activation in ACTIVATIONS, "activation",
               f"choose one of {sorted(ACTIVATIONS)}")
        _check(self.optimizer in OPTIMIZERS, "optimizer", f"choose one of {tuple(OPTIMIZERS)}")
        _check(self.mode in STEPPERS, "mode", f"choose one of {list(STEPPERS)}")
        for name in ("difficulty", "dropout", "learning_rate", "weight_decay", "seed",
                     "epochs", "train_per_class", "scan_steps", "devices"):
            _in_limits(name, getattr(self, name), name)

    # ------------------------------------------------------------ serialise
    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["layers"] = [{"kind": la.kind, "width": la.width, "options": dict(la.options)}
                          for la in self.layers]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Validate and build; unknown or ill-typed fields raise ``ValueError``
        naming the field."""
        if not isinstance(data, Mapping):
            raise ValueError("config must be a JSON object")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        _check(not unknown, ", ".join(unknown), "unknown config field")
        kwargs = {}
        for name, value in data.items():
            if name == "layers":
                _check(isinstance(value, list), "layers", "must be a list")
                layers = []
                for i, item in enumerate(value):
                    _check(isinstance(item, Mapping), f"layers[{i}]", "must be an object")
                    extra = sorted(set(item) - {"kind", "width", "options"})
                    _check(not extra, f"layers[{i}].{','.join(extra)}", "unknown layer field")
                    options = item.get("options", {})
                    _check(isinstance(options, Mapping), f"layers[{i}].options",
                           "must be an object")
                    width = item.get("width", 16)
                    _check(isinstance(width, int) and not isinstance(width, bool),
                           f"layers[{i}].width", "must be an integer")
                    layers.append(LayerConfig(str(item.get("kind", "gcn")), width,
                                              dict(options)))
                kwargs["layers"] = tuple(layers)
                continue
            default = fields[name].default
            if isinstance(default, bool):
                _check(isinstance(value, bool), name, "must be true or false")
            elif isinstance(default, int):
                _check(isinstance(value, int) and not isinstance(value, bool), name,
                       "must be an integer")
            elif isinstance(default, float):
                _check(isinstance(value, (int, float)) and not isinstance(value, bool),
                       name, "must be a number")
                value = float(value)
            elif isinstance(default, str):
                _check(isinstance(value, str), name, "must be a string")
            kwargs[name] = value
        return cls(**kwargs)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"config is not valid JSON: {err}") from None
        return cls.from_dict(data)

    def replace(self, **changes) -> RunConfig:
        return dataclasses.replace(self, **changes)


def _in_limits(field: str, value, limit: str) -> None:
    bound = LIMITS[limit]
    _check(bound.contains(value), field, f"must be {bound.describe()}")


def _check(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise ConfigError(field, message)
