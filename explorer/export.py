"""Export a run as a standalone Python script a student can read and run.

:func:`script_for` writes out what :class:`explorer.engine.Run` does for one
:class:`RunConfig`: the graph (embedded as literals, so the script needs no
preset or dataset code), the ``gnncore.GNN`` built with the same arguments and
seeds, the optimizer, the loss, and the training step *of the chosen JIT mode
only*, then a loop printing one row per step in the CLI's ``train`` format.
Same config, same seeds, same arrays: the script's losses match the engine's.

The script imports only the standard library, jax, flax, optax and gnncore.
Small arrays are printed as Python literals (float32 values in their shortest
form that reads back bit-exactly); large ones as zlib-compressed little-endian
bytes in base64, decoded with the standard library and ``jnp.frombuffer``.
"""

from __future__ import annotations

import base64
import inspect
import json
import textwrap
import zlib

import numpy as np

from explorer.config import RunConfig
from explorer.engine import recipe
from explorer.engine.inputs import EvalTargets, StepInputs
from explorer.engine.steppers import STEPPERS, Stepper
from explorer.engine.tasks import GraphTask
from explorer.sources import GRAPH_TASKS
from gnncore import Graph

__all__ = ["LITERAL_LIMIT", "MAX_SCRIPT_BYTES", "script_for"]

#: the largest script :func:`script_for` writes (bytes)
MAX_SCRIPT_BYTES = 5 * 1024 * 1024
#: arrays with more elements than this are embedded compressed, not as literals
LITERAL_LIMIT = 10_000
_WIDTH = 99  # line width of the generated code


def script_for(config: RunConfig, graph: Graph | None = None, *,
               graph_name: str | None = None) -> str:
    """The text of a standalone script reproducing ``Run(config, graph)``.

    Arguments:
        config: the run.
        graph: the node-classification graph to embed (a drawn or uploaded
            graph); default: the one ``Run`` would load for ``config.graph``.
            Graph-classification datasets take no graph.
        graph_name: how the script names a given ``graph`` (default "custom").

    Raises ``ValueError`` when the graph cannot be trained (no labels or train
    mask, no features) or the script would exceed :data:`MAX_SCRIPT_BYTES`.
    """
    kind = config.task
    if kind.pooled:
        data = _dataset_section(config, kind.load(config, graph))  # a dataset takes no graph
        name, source = config.graph, "graph-classification dataset"
    else:
        name, source = config.graph, "preset"
        if graph is None:
            graph = kind.load(config).graph
        else:
            name, source = graph_name or "custom", "drawn or uploaded graph"
        data = _node_section(config, graph)
    stepper = STEPPERS[config.mode]
    parts = [_header(config, name, source, data), _imports(config, data),
             _settings(config, name, stepper), _source(StepInputs, EvalTargets), data.text,
             _model_section(config, data), _step_section(stepper), _loop_section(stepper)]
    text = "\n\n\n".join(p.strip("\n") for p in parts) + "\n"
    size = len(text.encode("utf-8"))
    if size > MAX_SCRIPT_BYTES:
        raise ValueError(_too_big(size))
    return text


# ----------------------------------------------------------------- literals
class _Data:
    """The data section of a script and what the rest of it needs to know."""

    def __init__(self, text: str, *, summary: str, num_classes: int, compact: bool,
                 names: tuple[str, ...]):
        self.text, self.summary = text, summary
        self.num_classes, self.compact = num_classes, compact
        self.names = names  # what the section imports from gnncore


def _too_big(size: int) -> str:
    return (f"the script would be {size / 2**20:.1f} MB, over the "
            f"{MAX_SCRIPT_BYTES / 2**20:.0f} MB limit: the graph is too big to embed in a "
            "script; export a smaller graph")


def _float_texts(values: np.ndarray) -> list[str]:
    """Python literals for float32 values that read back (float → float32)
    bit-exactly: integers as ints, else the shortest float32 repr, else the
    exact double."""
    values = np.asarray(values, np.float32).reshape(-1)
    texts = []
    for v in values.tolist():  # Python floats: each is exactly its float32
        if v == 0.0:
            texts.append("-0.0" if np.signbit(v) else "0")
        elif v.is_integer() and abs(v) < 2**24:
            texts.append(str(int(v)))
        else:
            texts.append(str(np.float32(v)))
    back = np.asarray([float(t) for t in texts], np.float64).astype(np.float32)
    for i in np.flatnonzero(back.view(np.uint32) != values.view(np.uint32)):
        texts[i] = repr(float(values[i]))  # the double that is exactly this float32
    return texts


def _wrap(tokens: list[str], indent: int = 4) -> str:
    """Comma-separated tokens, wrapped at the line width (no brackets); a
    token is never split."""
    lines, line = [], ""
    for token in tokens:
        piece = token + ","
        if line and indent + len(line) + 1 + len(piece) > _WIDTH:
            lines.append(line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    if line:
        lines.append(line)
    return "\n".join(" " * indent + ln for ln in lines)


def _list(tokens: list[str], indent: int = 0) -> str:
    """``[a, b, ...]`` on one line when it fits, else wrapped."""
    one = "[" + ", ".join(tokens) + "]"
    if indent + len(one) + 10 <= _WIDTH:
        return one
    return "[\n" + _wrap(tokens, indent + 4) + "\n" + " " * indent + "]"


def _str(text: str) -> str:
    """A string literal in double quotes (JSON's escapes are valid Python)."""
    return json.dumps(str(text))


def _packed(tokens: list[str], indent: int) -> str:
    """``[a, b, ...]`` packed into lines; continuation lines are indented by
    ``indent + 1`` (the first line goes wherever the caller puts it)."""
    lines, line = [], "["
    for k, token in enumerate(tokens):
        piece = token + ("," if k < len(tokens) - 1 else "]")
        if line not in ("[", "") and indent + 1 + len(line) + 1 + len(piece) > _WIDTH:
            lines.append(line)
            line = piece
        else:
            line = line + piece if line == "[" else (f"{line} {piece}" if line else piece)
    if not tokens:
        line = "[]"
    lines.append(line)
    return ("\n" + " " * (indent + 1)).join(lines)


def _ints(values) -> list[str]:
    return [str(int(v)) for v in np.asarray(values).reshape(-1).tolist()]


def _pack(values: np.ndarray, dtype: str) -> str:
    """``unpack("...", dtype, shape)``: an array as compressed base64 text."""
    arr = np.ascontiguousarray(np.asarray(values).astype(np.dtype(dtype).newbyteorder("<")))
    data = base64.b64encode(zlib.compress(arr.tobytes(), 9)).decode("ascii")
    lines = [data[i:i + _WIDTH - 8] for i in range(0, len(data), _WIDTH - 8)]
    body = "\n".join(f'    "{line}"' for line in lines) or '    ""'
    code = {"float32": "f", "int32": "i"}[dtype]
    return f"unpack(\n{body},\n    \"{code}\", {tuple(arr.shape)!r})"


def _array(values, dtype: str) -> str:
    """A 1-D array as Python source: a list literal (floats that read back
    bit-exactly), or above :data:`LITERAL_LIMIT` elements compressed text."""
    values = np.asarray(values)
    if values.size > LITERAL_LIMIT:
        return _pack(values, dtype)
    return _list(_float_texts(values) if dtype == "float32" else _ints(values))


def _matrix(values: np.ndarray) -> str:
    """Float rows, one per node: ``[[...], ...]``."""
    values = np.asarray(values, np.float32)
    texts = _float_texts(values)
    width = values.shape[1] if values.ndim == 2 else 1
    rows = [texts[i:i + width] for i in range(0, len(texts), width)]
    if not rows:
        return "[]"
    return "[\n" + "\n".join("    " + _list(r, 4) + "," for r in rows) + "\n]"


def _pairs(edge_index: np.ndarray, indent: int = 0) -> str:
    ei = np.asarray(edge_index).reshape(2, -1)
    tokens = [f"({s}, {t})" for s, t in zip(ei[0].tolist(), ei[1].tolist())]
    return _list(tokens, indent)


# ------------------------------------------------------------------- header
def _header(config: RunConfig, name: str, source: str, data: _Data) -> str:
    layers = " -> ".join(f"{la.kind}:{la.width}" + (f" {dict(la.options)}" if la.options else "")
                         for la in config.layers)
    extras = []
    if config.dropout:
        extras.append(f"dropout {config.dropout}")
    if config.batch_norm:
        extras.append(f"{config.norm} norm")
    if config.residual:
        extras.append("residual connections")
    if recipe.uses_head(config):
        extras.append("linear head")
    if config.task.pooled:
        extras.append(f"{config.pool} pooling")
    if config.bucket_padding and config.task.editable:
        extras.append("bucket padding")
    config_json = textwrap.fill(json.dumps(config.to_dict(), sort_keys=True), width=_WIDTH - 4,
                                initial_indent="    ", subsequent_indent="    ",
                                break_long_words=True, break_on_hyphens=False)
    devices = ("" if config.devices == 1 else
               f"\nThe explorer trained this run on {config.devices} devices (its inputs split "
               "over a 'data'\nmesh, XLA adding the communication); this script trains on "
               "one, and its\nlosses equal the split run's up to float rounding (tested to "
               "1e-5).\n")
    note = ("" if source != "drawn or uploaded graph" else
            " (its graph fields describe the preset the graph\nreplaced; the script embeds "
            "the drawn or uploaded graph itself)")
    lesson = textwrap.fill(f"{config.mode}: {STEPPERS[config.mode].summary}", width=_WIDTH - 14,
                           subsequent_indent=" " * 14)
    doc = f'''\
Reproduce a GNN JIT Explorer run: {config.mode} mode on {name!r} ({source}).

This script was exported by GNN JIT Explorer. It trains the same model, from the
same initial weights, on the same data as the explorer did and prints the same
loss every step. It needs only jax, flax, optax and gnncore (the gnncore folder
of GNN JIT Explorer next to this script, or its parent folder on PYTHONPATH).

    graph:    {name} ({source})
              {data.summary}
    task:     classify {config.task.unit}
    layers:   {layers}{" + " + ", ".join(extras) if extras else ""}
    training: {config.optimizer}, learning rate {config.learning_rate}, weight decay \
{config.weight_decay}, {config.epochs} steps
    JIT mode: {lesson}
    seed:     {config.seed}

Run it:

    python this_script.py              # {config.epochs} steps, as configured
    python this_script.py --steps 5    # fewer (or more) steps

It prints one row per step (step, loss, train/val/test accuracy, milliseconds)
and, at the end, how many parameter arrays training changed.
{devices}
The full run configuration{note}:

{config_json}
'''
    # names come from users (e.g. an upload's file name): no quote may end the docstring
    doc = doc.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'#!/usr/bin/env python3\n"""{doc}"""'


def _imports(config: RunConfig, data: _Data) -> str:
    stdlib = ["argparse", "dataclasses", "math", "time"]
    if data.compact:
        stdlib += ["array", "base64", "sys", "zlib"]
    names = sorted({"GNN", "ConvSpec", *data.names}, key=str.lower)
    return ("\n".join(f"import {m}" for m in sorted(stdlib)) + "\nfrom typing import NamedTuple\n\n"
            "import jax\nimport jax.numpy as jnp\nimport optax\nfrom flax import nnx\n\n"
            f"from gnncore import {', '.join(names)}")


def _source(*objects) -> str:
    """The engine's own code for ``objects`` (functions or classes), with the
    comment block above each, as an exported script contains it."""
    return "\n\n\n".join((inspect.getcomments(o) or "") + inspect.getsource(o).rstrip()
                          for o in objects)


def _settings(config: RunConfig, name: str, stepper: type[Stepper]) -> str:
    extra = stepper.script_settings(config)
    return f'''\
MODE = {_str(config.mode)}
GRAPH_NAME = {_str(name)}
SEED = {config.seed}
STEPS = {config.epochs}{chr(10) + extra if extra else ""}

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=STEPS,
                    help=f"training steps (default {{STEPS}})")
args = parser.parse_args()
if args.steps < 1:
    parser.error("--steps must be at least 1")'''


_UNPACK = '''
def unpack(text, typecode, shape):
    """An array too big to print, as (nested) Python lists. It is stored as
    zlib-compressed little-endian bytes in base64: typecode "f" is float32,
    "i" int32 (see the standard library's array module)."""
    values = array.array(typecode)
    values.frombytes(zlib.decompress(base64.b64decode(text)))
    if sys.byteorder == "big":
        values.byteswap()
    flat = values.tolist()
    if len(shape) == 1:
        return flat
    return [flat[i:i + shape[1]] for i in range(0, len(flat), shape[1])]
'''

_MASK = '''
def mask(indices, size):
    """A list of ``size`` booleans, True at ``indices``."""
    chosen = set(indices)
    return [i in chosen for i in range(size)]
'''


# --------------------------------------------------------------------- data
def _node_section(config: RunConfig, graph: Graph) -> _Data:
    if graph.x is None:
        raise ValueError("the graph has no node features")
    if graph.y is None or graph.train_mask is None:
        raise ValueError("the graph needs labels (y) and a train mask to be trained")
    n, e = graph.num_nodes, graph.num_edges
    x = np.asarray(graph.x, np.float32)
    ei = np.asarray(graph.edge_index).reshape(2, -1)
    ew = None if graph.edge_weight is None else np.asarray(graph.edge_weight, np.float32)
    y = np.asarray(graph.y, np.int32)
    masks = {name: (np.zeros(n, bool) if getattr(graph, name) is None
                    else np.asarray(getattr(graph, name), bool))
             for name in ("train_mask", "val_mask", "test_mask")}
    identity = x.shape == (n, n) and np.array_equal(x, np.eye(n, dtype=np.float32))
    raw = ei.nbytes + y.nbytes + (0 if identity else x.nbytes) + (0 if ew is None else ew.nbytes)
    if raw > 8 * MAX_SCRIPT_BYTES:  # not worth compressing to find out
        raise ValueError(_too_big(raw))
    classes = max(graph.num_classes(), 2)
    out = []
    if 2 * e > LITERAL_LIMIT:
        out.append(f"# edges as [sources, targets], sorted by target\nEDGE_INDEX = "
                   f"{_pack(ei, 'int32')}")
    else:
        out.append(f"# (source, target) pairs, sorted by target (then source)\n"
                   f"EDGES = {_pairs(ei)}\n"
                   "EDGE_INDEX = [[s for s, _ in EDGES], [t for _, t in EDGES]]")
    if ew is None:
        out.append("EDGE_WEIGHTS = None  # unweighted")
    else:
        out.append(f"# one weight per edge, in the order of the edges\nEDGE_WEIGHTS = "
                   f"{_array(ew, 'float32')}")
    if identity:
        out.append("# node features: one-hot node ids (row i is 1 in column i)\n"
                   "FEATURES = jnp.eye(NUM_NODES, dtype=jnp.float32)")
    elif x.size > LITERAL_LIMIT:
        out.append(f"# node features, [nodes, features]\nFEATURES = {_pack(x, 'float32')}")
    else:
        out.append(f"# node features, one row per node\nFEATURES = {_matrix(x)}")
    out.append(f"# the class of each node (-1: unlabelled)\nLABELS = {_array(y, 'int32')}")
    comments = {"train_mask": "# the nodes whose labels the loss sees\n",
                "val_mask": "# validation and test nodes (only for the accuracies)\n",
                "test_mask": ""}
    for name, what in (("train_mask", "TRAIN_NODES"), ("val_mask", "VAL_NODES"),
                       ("test_mask", "TEST_NODES")):
        out.append(f"{comments[name]}{what} = {_array(np.flatnonzero(masks[name]), 'int32')}")
    compact = any("unpack(" in part for part in out)
    out.insert(0, f"NUM_NODES = {n}")
    if compact:
        out.insert(0, "\n" + _UNPACK.strip("\n") + "\n")
    out.insert(0, f"# ----------------------------------------------------------------- the data\n"
                  f"# {n} nodes and {e} directed edges (an undirected edge is listed both ways),\n"
                  f"# {x.shape[1]} features per node, {classes} classes.")
    out.append(f"NUM_CLASSES = {classes}  # max(label) + 1, at least 2")
    out.append("\n" + _MASK.strip("\n") + "\n")
    sort = "" if graph.edges_sorted else ", sort_edges=False"
    out.append(f"""\
# Graph.from_arrays validates the arrays and builds the sorted CSR adjacency
# (graph.adj) that gnncore's layers aggregate with.
graph = Graph.from_arrays(
    EDGE_INDEX, FEATURES, num_nodes=NUM_NODES, edge_weight=EDGE_WEIGHTS, y=LABELS,
    train_mask=mask(TRAIN_NODES, NUM_NODES), val_mask=mask(VAL_NODES, NUM_NODES),
    test_mask=mask(TEST_NODES, NUM_NODES){sort})""")
    if config.bucket_padding:
        out.append("""\
# Bucket padding: nodes and edges are padded up to power-of-two sizes, so that
# editing the graph within a bucket keeps the shapes (and the compiled step).
# Padding nodes have no features and no label; node_mask keeps them out of the
# loss and of batch norm statistics; padding edges are self-loops among them.
padded = graph.pad_to(bucket_size(graph.num_nodes + 1), bucket_size(graph.num_edges))
node_mask = jnp.array([i < graph.num_nodes for i in range(padded.num_nodes)])
features = padded.x  # dense: as CSR, their number of non-zeros would change the shapes""")
    else:
        out.append("""\
padded = graph  # no bucket padding: the step sees the graph's exact shapes
node_mask = jnp.array([True] * graph.num_nodes)  # every node is real
# Large, mostly-zero features (a bag of words, the one-hot ids of a big graph) go
# in as CSR (SparseFeatures), so that the first layer's product costs only their
# non-zeros; any other features stay as they are.
features = sparse_if_mostly_zero(graph.x)""")
    out.append("""\
inputs = StepInputs(features, padded.adj, padded.edge_weight, padded.y, padded.train_mask,
                    node_mask)
# for the accuracies: the real nodes' labels and splits
targets = EvalTargets(graph.y, graph.train_mask, graph.val_mask, graph.test_mask)""")
    ew_text = "" if ew is None else ", weighted"
    summary = (f"{n} nodes, {e} directed edges{ew_text}, {x.shape[1]} features, "
               f"{classes} classes")
    names = ("Graph", "bucket_size") if config.bucket_padding else ("Graph",
                                                                   "sparse_if_mostly_zero")
    return _Data("\n\n".join(out), summary=summary, num_classes=classes, compact=compact,
                 names=names)


def _dataset_section(config: RunConfig, task: GraphTask) -> _Data:
    graphs, labels, split, classes = task.graphs, task.labels, task.split, task.num_classes
    entries = []
    for i, g in enumerate(graphs):
        ei = np.asarray(g.edge_index).reshape(2, -1)
        edges = _packed([f"({s}, {t})" for s, t in zip(ei[0].tolist(), ei[1].tolist())], 5)
        x = np.asarray(g.x, np.float32)
        texts = _float_texts(x)
        rows = ["[" + ", ".join(texts[j:j + x.shape[1]]) + "]"
                for j in range(0, len(texts), x.shape[1])]
        entries.append(f"    ({g.num_nodes},  # graph {i}\n     {edges},\n     "
                       f"{_packed(rows, 5)}),")
    width = graphs[0].num_features
    text = [f"""\
# ----------------------------------------------------------------- the data
# {len(graphs)} small graphs of {config.graph!r} ({GRAPH_TASKS[config.graph][0]}), node features
# {config.features!r} ({width} per node). One entry per graph: (number of nodes,
# (source, target) edge pairs sorted by target, one feature row per node).
GRAPHS = [
""" + "\n".join(entries) + "\n]",
            f"# the class of each graph\nGRAPH_LABELS = {_list(_ints(labels))}",
            "# the graphs whose labels the loss sees; validation and test graphs\n"
            + "\n".join(f"{what} = {_list(_ints(np.flatnonzero(m)))}" for what, m in
                        zip(("TRAIN_GRAPHS", "VAL_GRAPHS", "TEST_GRAPHS"), split)),
            f"NUM_CLASSES = {classes}  # max(label) + 1, at least 2",
            "\n" + _MASK.strip("\n") + "\n",
            '''\
graphs = [Graph.from_arrays([[s for s, _ in edges], [t for _, t in edges]], features,
                            num_nodes=num_nodes)
          for num_nodes, edges, features in GRAPHS]

# All graphs train as one padded batch: their disjoint union, padded to bucket
# sizes. Padding nodes form one extra "padding graph"; the graph slots after the
# real graphs have label -1 and are masked out of the loss.
data = Batch.from_graphs(graphs, GRAPH_LABELS)
inputs = StepInputs(data.x, data.adj, data.edge_weight, data.y,
                    jnp.array(mask(TRAIN_GRAPHS, data.num_graphs)), data.node_mask, data.batch,
                    data.num_graphs)
# for the accuracies: the real graphs' labels and splits
targets = EvalTargets(jnp.asarray(GRAPH_LABELS), *(
    jnp.array(mask(s, len(GRAPHS))) for s in (TRAIN_GRAPHS, VAL_GRAPHS, TEST_GRAPHS)))''']
    nodes = sum(g.num_nodes for g in graphs)
    summary = (f"{len(graphs)} graphs, {nodes} nodes in all, {width} features per node, "
               f"{classes} classes")
    return _Data("\n\n".join(text), summary=summary, num_classes=classes, compact=False,
                 names=("Batch", "Graph"))


# -------------------------------------------------------------------- model
def _model_section(config: RunConfig, data: _Data) -> str:
    head, pooled = recipe.uses_head(config), config.task.pooled
    specs = recipe.conv_specs(config, data.num_classes)  # the engine's output-layer rule
    spec_lines = "\n".join(f"    ConvSpec({_str(s.kind)}, {s.out_features}, {dict(s.options)!r}),"
                           for s in specs)
    if head:
        why = ("every conv is a hidden block; pooled per graph, then a linear head"
               if pooled else "every conv is a hidden block, then a linear head")
    else:
        averaged = (" (its attention heads averaged, not concatenated)"
                    if specs[-1].options.get("concat") is False else "")
        why = f"the last conv outputs the {data.num_classes} classes{averaged}"
    why = textwrap.fill(f"One ConvSpec per layer ({why}).", width=_WIDTH - 2,
                        initial_indent="# ", subsequent_indent="# ")
    activation = {"relu": "ReLU", "identity": "no"}.get(config.activation, config.activation)
    norm = config.norm if config.batch_norm else None
    optimizer = recipe.OPTIMIZERS[config.optimizer]
    heads = sorted({int(s.options.get("heads", 1)) for s in specs} - {1})
    blocks = "" if not heads else "\n\n" + textwrap.fill(
        f"The index arrays of the {' and '.join(map(str, heads))}-head attention products, "
        "built once here (as the engine does) instead of in every step: the same results, "
        "a shorter step on a large graph.", width=_WIDTH - 2, initial_indent="# ",
        subsequent_indent="# ") + (
        "\ninputs = dataclasses.replace(inputs, adj=inputs.adj.for_model(model))")
    return f'''\
# ---------------------------------------------------------------- the model
{why}
# Hidden blocks: conv -> {"norm -> " if norm else ""}{activation} activation\
{" -> + residual" if config.residual else ""}{" -> dropout" if config.dropout else ""}.
convs = [
{spec_lines}
]
# The seeds: "params" draws the initial weights, "dropout" the dropout masks.
rngs = nnx.Rngs(params=SEED, dropout=SEED + 1)
model = GNN(
    inputs.x.shape[1],
    convs,
    out_features=NUM_CLASSES,
    activation={_str(config.activation)},
    dropout={config.dropout!r},
    norm={norm and _str(norm)},
    residual={config.residual!r},
    head={head!r},
    pool={_str(config.pool) if pooled else None},
    rngs=rngs,
){blocks}


{_source(optimizer)}


# updates the nnx.Param variables
optimizer = nnx.Optimizer(model, {optimizer.__name__}({config.learning_rate!r}, \
{config.weight_decay!r}), wrt=nnx.Param)
model.train()  # training mode: dropout on, batch norm updates its statistics


{_source(recipe.masked_cross_entropy, recipe.forward, recipe.train_step, recipe.evaluate)}'''


# --------------------------------------------------------------------- step
def _step_section(stepper: type[Stepper]) -> str:
    title = f" the step: {stepper.mode} mode"
    return f'''\
# {title:->75}
{_source(stepper.make, *stepper.script_sources)}


{stepper.script_build}{"" if stepper.script_loop else _ACCURACIES}'''


# a mode with its own loop (scan) measures the accuracies inside its compiled call
_ACCURACIES = '''
evaluate_jitted = jax.jit(evaluate)  # pure: plain jax.jit is safe


def accuracies(model):
    """Train, validation and test accuracy, in eval mode."""
    model.eval()
    try:
        _, _, accuracy = evaluate_jitted(model, inputs, targets)
    finally:
        model.train()
    return [float(a) for a in accuracy]'''


# --------------------------------------------------------------------- loop
def _loop_section(stepper: type[Stepper]) -> str:
    finish = f"\n{stepper.script_finish}\n" if stepper.script_finish else ""
    loop = stepper.script_loop or f'''\
for i in range(1, args.steps + 1):
    start = time.perf_counter()
    {stepper.script_call}
    loss = float(loss)  # waits for the step to finish
    ms = 1e3 * (time.perf_counter() - start)
    if not math.isfinite(loss):
        print(f"stopped: loss became {{loss}} at step {{i}} (lower the learning rate)")
        break
    train_acc, val_acc, test_acc = accuracies({stepper.script_model})
    print(f"{{i:>6}} {{loss:>10.6f}} {{train_acc:>6.2f}} {{val_acc:>6.2f}} "
          f"{{test_acc:>6.2f}} {{ms:>9.2f}}")'''
    return f'''\
# --------------------------------------------------------------------- train
print(f"mode {{MODE}} | graph {{GRAPH_NAME}} | {{args.steps}} steps | seed {{SEED}}")
print(f"{{'step':>6}} {{'loss':>10}} {{'train':>6}} {{'val':>6}} {{'test':>6}} {{'ms':>9}}")
# jax arrays are immutable: these stay the initial values while training
# replaces the model's arrays with new ones
initial = jax.tree.leaves(nnx.state(model, nnx.Param))
{loop}
{finish}
final = jax.tree.leaves(nnx.state(model, nnx.Param))
changed = sum(not bool(jnp.array_equal(a, b)) for a, b in zip(initial, final))
print(f"parameters changed: {{changed}} of {{len(final)}}")
if changed == 0:
    print("frozen: no parameter changed, training had no effect")'''
