"""Cora with the public split: a 2-layer GCN reaches the published accuracy."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from gnncore import GCN, Graph


def load_planetoid_npz(path) -> Graph:
    data = np.load(path, allow_pickle=False)
    ei = data["edge_index"]
    if bool(data["undirected"]):
        ei = np.concatenate([ei, ei[::-1]], axis=1)
    x = data["x"].astype(np.float32)
    x = x / np.maximum(x.sum(1, keepdims=True), 1.0)  # row-normalised, as in Kipf & Welling
    return Graph.from_arrays(ei, x, y=data["y"], train_mask=data["train_mask"],
                             val_mask=data["val_mask"], test_mask=data["test_mask"])


@pytest.mark.slow
def test_gcn_reaches_published_accuracy_on_cora(cora_path):
    g = load_planetoid_npz(cora_path)
    assert (g.num_nodes, g.num_edges) == (2708, 10556)
    assert int(g.train_mask.sum()) == 140 and int(g.test_mask.sum()) == 1000

    model = GCN(g.num_features, 16, g.num_classes(), dropout=0.5, rngs=nnx.Rngs(0))
    tx = optax.chain(optax.add_decayed_weights(5e-4), optax.adam(0.01))  # torch-style L2
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    train = jnp.asarray(g.train_mask, jnp.float32)

    @nnx.jit
    def train_step(model, optimizer, graph):
        def loss_fn(model):
            logits = model(graph.x, graph.edge_index)
            losses = optax.softmax_cross_entropy_with_integer_labels(logits, graph.y)
            return jnp.sum(losses * train) / jnp.sum(train)

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    model.train()
    losses = [float(train_step(model, optimizer, g)) for _ in range(200)]
    assert losses[-1] < 0.5 * losses[0]
    assert int(optimizer.step[...]) == 200

    model.eval()
    pred = np.asarray(jnp.argmax(model(g.x, g.edge_index), axis=1))
    y, test = np.asarray(g.y), np.asarray(g.test_mask)
    accuracy = float(np.mean(pred[test] == y[test]))
    assert accuracy >= 0.79, accuracy
