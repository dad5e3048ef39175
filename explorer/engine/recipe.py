"""The training recipe: the model a config describes, its optimizer, the loss,
the forward pass, the training step and the evaluation.

Every JIT mode wraps the same :func:`train_step`, and exported scripts
(``explorer.export``) contain the source of the functions below as they are:
the script you download is the code that ran. So they import nothing but jax,
flax, optax and gnncore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from explorer import jax_first  # noqa: F401  (must stay before JAX's import)

# isort: split
import jax.numpy as jnp
import optax
from flax import nnx

from explorer.engine.optimizers import OPTIMIZERS
from gnncore import CONV_TYPES, GNN, ConvSpec

if TYPE_CHECKING:
    from explorer.config import RunConfig

__all__ = ["OPTIMIZERS", "build_model", "build_optimizer", "conv_specs", "evaluate",
           "forward", "masked_cross_entropy", "train_step", "uses_head"]


# ------------------------------------------------------------------ the model
def uses_head(config: RunConfig) -> bool:
    """Whether every conv is a hidden block followed by a linear head: asked
    for, or needed by a pooled (graph-classification) readout."""
    return config.head or config.task.pooled


def conv_specs(config: RunConfig, num_classes: int) -> list[ConvSpec]:
    """One ``ConvSpec`` per layer. The output-layer rule: without a head, the
    last conv outputs the classes, and an attention conv there averages its
    heads instead of concatenating them."""
    specs = [ConvSpec(la.kind, la.width, dict(la.options)) for la in config.layers]
    if not uses_head(config):
        last = specs[-1]
        options = dict(last.options)
        if CONV_TYPES[last.kind].has_heads:
            options["concat"] = False
        specs[-1] = ConvSpec(last.kind, num_classes, options)
    return specs


def build_model(config: RunConfig, in_features: int, num_classes: int) -> GNN:
    """The ``gnncore.GNN`` a config describes, from the seed's initial weights:
    ``params`` draws the weights and ``dropout`` the dropout masks."""
    rngs = nnx.Rngs(params=config.seed, dropout=config.seed + 1)
    return GNN(in_features, conv_specs(config, num_classes), out_features=num_classes,
               activation=config.activation, dropout=config.dropout,
               norm=config.norm if config.batch_norm else None, residual=config.residual,
               head=uses_head(config), pool=config.pool if config.task.pooled else None,
               rngs=rngs)


def build_optimizer(config: RunConfig, model: GNN, tx=None) -> nnx.Optimizer:
    """The config's optimizer over the model's ``nnx.Param`` variables.
    ``tx``: the config's optax transform when the caller already has it (runs
    sharing compiled steps share it: its functions are static structure of
    the optimizer, part of what a compiled step is keyed by)."""
    if tx is None:
        tx = OPTIMIZERS[config.optimizer](config.learning_rate, config.weight_decay)
    return nnx.Optimizer(model, tx, wrt=nnx.Param)


# --------------------------------------------------------- loss, step, eval
def masked_cross_entropy(logits, labels, mask):
    """Mean softmax cross-entropy over the targets in ``mask``."""
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.maximum(labels, 0))
    weight = mask.astype(logits.dtype)
    return jnp.sum(losses * weight) / jnp.maximum(jnp.sum(weight), 1.0)


def forward(model, inputs, **kwargs):
    """The logits: one row per node, or, when the inputs hold a batch of
    graphs, one row per graph slot (node embeddings pooled per graph)."""
    if inputs.batch is not None:
        kwargs.update(batch=inputs.batch, num_graphs=inputs.num_graphs)
    return model(inputs.x, inputs.adj, inputs.edge_weight, node_mask=inputs.node_mask,
                 **kwargs)


def train_step(model, optimizer, inputs):
    """One step: the loss and its gradients on the training targets, then the
    optimizer update, which mutates ``model`` and ``optimizer`` in place."""

    def loss_fn(model):
        return masked_cross_entropy(forward(model, inputs), inputs.y, inputs.train_mask)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def evaluate(model, inputs, targets):
    """Logits of every row, their argmax, and the share of correct predictions
    in each split (train, validation, test; 0 for an empty split). Pure: it
    mutates nothing, so plain ``jax.jit`` is safe here. Call it in eval mode
    (no dropout; batch norm uses its running statistics)."""
    logits = forward(model, inputs)
    pred = jnp.argmax(logits, axis=-1)
    real = pred[:targets.labels.shape[0]]  # the rows after them are padding
    accuracy = [jnp.sum((real == targets.labels) & mask) / jnp.maximum(jnp.sum(mask), 1)
                for mask in (targets.train, targets.val, targets.test)]
    return logits, pred, jnp.stack(accuracy)
