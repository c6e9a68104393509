"""Many small MLPs trained at once with batched matrix products (Liu, Scaglione & Peisert 2025, Sec. V-D, Fig. 12).

The downstream model of Fig. 12 is ``d -> 256 -> 128 -> 10`` with ReLU activations, softmax
(cross-entropy) loss, plain SGD, mini-batches of 128, learning rate 0.01 and one epoch. Here every
weight carries a leading model dimension ``M``: one forward/backward pass trains M independent networks
(one per released model, per seed, per learning rate) on M different training sets. Because the total
loss is a sum of per-model losses, autograd's gradient for model m is exactly that model's own gradient.

Initialisation follows ``torch.nn.Linear`` (weights and biases uniform in +-1/sqrt(fan_in)), shuffling is
a fresh permutation per model and epoch, the last mini-batch of an epoch may be smaller (as a
``DataLoader`` with ``drop_last=False``). Randomness comes only from ``generator``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

__all__ = ["init_mlp", "mlp_forward", "mlp_accuracy", "train_mlps", "MLPTrainResult"]


def init_mlp(
    num_models: int,
    sizes: Sequence[int],
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> list[torch.Tensor]:
    """Parameters ``[W1 (M,s0,s1), b1 (M,s1), W2, b2, ...]`` drawn like ``torch.nn.Linear``'s defaults."""
    params: list[torch.Tensor] = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        W = (torch.rand(num_models, fan_in, fan_out, generator=generator, dtype=dtype, device=device) * 2 - 1) * bound
        b = (torch.rand(num_models, fan_out, generator=generator, dtype=dtype, device=device) * 2 - 1) * bound
        params += [W, b]
    return params


def mlp_forward(params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Logits ``(M, n, C)`` for inputs ``x (M, n, d)`` or a shared ``x (n, d)``."""
    h = x
    L = len(params) // 2
    for i in range(L):
        W, b = params[2 * i], params[2 * i + 1]
        h = torch.matmul(h, W) + b.unsqueeze(-2)
        if i < L - 1:
            h = torch.relu(h)
    return h


@torch.no_grad()
def mlp_accuracy(params: Sequence[torch.Tensor], X: torch.Tensor, y: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """Accuracy ``(M,)`` of each model on a shared test set ``X (n, d)``, ``y (n,)`` (chunked to bound memory)."""
    dt = params[0].dtype
    correct = torch.zeros(params[0].shape[0], dtype=torch.float64, device=params[0].device)
    for s in range(0, X.shape[0], chunk):
        logits = mlp_forward(params, X[s : s + chunk].to(dt))
        correct += (logits.argmax(-1) == y[s : s + chunk]).sum(-1).to(torch.float64)
    return correct / X.shape[0]


@dataclass
class MLPTrainResult:
    """``iterations (E,)`` at which ``accuracy (M, E)`` was measured (0 = before training); final ``params``."""

    iterations: torch.Tensor
    accuracy: torch.Tensor
    params: list[torch.Tensor]


def train_mlps(
    X: torch.Tensor,
    y: torch.Tensor,
    X_test: torch.Tensor,
    y_test: torch.Tensor,
    num_classes: int = 10,
    hidden: Sequence[int] = (256, 128),
    epochs: int = 1,
    lr: float | torch.Tensor = 0.01,
    batch_size: int = 128,
    eval_every: int = 1,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
) -> MLPTrainResult:
    """Train M MLPs with SGD on ``X (M, n, d)``, ``y (M, n)``; test accuracy vs iteration on a shared test set.

    ``lr`` is a float or a tensor ``(M,)`` (one learning rate per model, so a learning-rate grid is one
    batch). Accuracy is recorded before training and every ``eval_every`` SGD steps, and after the last.
    """
    if X.dim() != 3 or y.shape != X.shape[:2]:
        raise ValueError(f"X must be (M, n, d) and y (M, n); got {tuple(X.shape)} and {tuple(y.shape)}")
    if epochs < 1 or batch_size < 1 or eval_every < 1:
        raise ValueError("epochs, batch_size and eval_every must be >= 1")
    M, n, d = X.shape
    dev = X.device
    params = init_mlp(M, [d, *hidden, num_classes], generator=generator, dtype=dtype, device=dev)
    for p in params:
        p.requires_grad_(True)
    lr_t = torch.as_tensor(lr, dtype=dtype, device=dev)
    if lr_t.dim() == 0:
        lr_t = lr_t.expand(M)
    if lr_t.shape != (M,):
        raise ValueError(f"lr must be a float or a tensor of shape ({M},), got {tuple(lr_t.shape)}")
    Xd = X.to(dtype)
    Xt = X_test.to(dtype)
    steps_per_epoch = math.ceil(n / batch_size)
    its, accs = [0], [mlp_accuracy(params, Xt, y_test)]
    step = 0
    for _ in range(epochs):
        perm = torch.argsort(torch.rand(M, n, generator=generator, device=dev), dim=1)
        for b in range(steps_per_epoch):
            idx = perm[:, b * batch_size : (b + 1) * batch_size]
            xb = torch.gather(Xd, 1, idx.unsqueeze(-1).expand(-1, -1, d))
            yb = torch.gather(y, 1, idx)
            logits = mlp_forward(params, xb)
            # sum over models of each model's mean cross-entropy: gradients stay per model
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, num_classes), yb.reshape(-1), reduction="none"
            ).reshape(M, -1).mean(-1).sum()
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for p, g in zip(params, grads):
                    p -= lr_t.reshape((M,) + (1,) * (p.dim() - 1)) * g
            step += 1
            if step % eval_every == 0:
                its.append(step)
                accs.append(mlp_accuracy(params, Xt, y_test))
    if its[-1] != step:
        its.append(step)
        accs.append(mlp_accuracy(params, Xt, y_test))
    return MLPTrainResult(
        iterations=torch.tensor(its),
        accuracy=torch.stack(accs, dim=-1),
        params=[p.detach() for p in params],
    )
