"""Training classifiers on synthetic data: a batched MLP trainer that never touches private data.

:func:`train_on_sampler` trains an MLP (ReLU, cross-entropy, Adam; Kingma & Ba 2015) on minibatches of
*fresh* synthetic samples every epoch (``sampler(n, generator) -> (X, y)``, e.g. ``ClassMixture.sample``),
keeps the parameters with the best accuracy on a fixed synthetic validation set drawn once from the same
sampler, and stops after ``patience`` epochs without improvement. Because the sampler is post-processing
of a DP release, so is every model trained this way: one release serves any number of models at no extra
privacy cost. Runs on ``device`` (the GPU when present): ``generator`` lives there too (the generator rule,
:mod:`torchdpgmm.pipelines.generators`); the samples, the validation set and the minibatch orders are drawn
on the device, and the one host-side draw (the seed of ``torch.nn``'s initialisation) is a seed drawn from
``generator`` on its own device.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from .generators import check_generator_device, draw_seed

__all__ = ["make_mlp", "train_on_sampler", "TrainResult", "accuracy"]


def make_mlp(d: int, num_classes: int, hidden: Sequence[int] = (256, 128)) -> torch.nn.Sequential:
    sizes = [d, *hidden, num_classes]
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


@torch.no_grad()
def accuracy(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, *, chunk: int = 8192) -> float:
    dev = next(model.parameters()).device
    correct = 0
    for s in range(0, X.shape[0], chunk):
        pred = model(X[s:s + chunk].to(dev, torch.float32)).argmax(-1)
        correct += int((pred == y[s:s + chunk].to(dev)).sum())
    return correct / max(1, X.shape[0])


@dataclass
class TrainResult:
    model: torch.nn.Module
    best_epoch: int
    epochs_run: int
    val_accuracy: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train_on_sampler(sampler: Callable, *, d: int, num_classes: int, n_per_epoch: int, n_val: int = 10000,
                     hidden: Sequence[int] = (256, 128), lr: float = 1e-3, batch_size: int = 256,
                     max_epochs: int = 30, patience: int = 5, weight_decay: float = 0.0,
                     generator: torch.Generator | None = None, device: str | torch.device = "cpu",
                     validation: tuple[torch.Tensor, torch.Tensor] | None = None) -> TrainResult:
    """Adam on fresh synthetic minibatches each epoch; early stopping on synthetic validation accuracy.

    ``validation=(X, y)`` replaces the synthetic validation set (for the non-private reference trained on
    real data); with a synthetic sampler leave it None so that no private record is touched.
    """
    if n_per_epoch < 1 or max_epochs < 1 or batch_size < 1 or patience < 1:
        raise ValueError("n_per_epoch, max_epochs, batch_size and patience must be >= 1")
    t0 = time.perf_counter()
    dev = torch.device(device)
    check_generator_device(generator, dev)
    seed = draw_seed(generator)  # on the generator's device, one host read per training
    with torch.random.fork_rng(devices=[]):  # torch.nn.Linear draws from the global CPU generator: fork it
        torch.manual_seed(seed)
        model = make_mlp(d, num_classes, hidden)
    model = model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay, foreach=True)
    Xv, yv = sampler(n_val, generator=generator) if validation is None else validation
    Xv, yv = Xv.to(dev, torch.float32), yv.to(dev)
    best, best_state, best_epoch, hist = -1.0, None, 0, []
    lossf = torch.nn.CrossEntropyLoss()
    for epoch in range(1, max_epochs + 1):
        X, y = sampler(n_per_epoch, generator=generator)
        X, y = X.to(dev, torch.float32), y.to(dev)
        perm = torch.randperm(X.shape[0], generator=generator, device=dev)  # drawn where the rows are
        model.train()
        for s in range(0, X.shape[0], batch_size):
            idx = perm[s:s + batch_size]
            opt.zero_grad(set_to_none=True)
            lossf(model(X[idx]), y[idx]).backward()
            opt.step()
        model.eval()
        acc = accuracy(model, Xv, yv)
        hist.append(acc)
        if acc > best:
            best, best_epoch, best_state = acc, epoch, copy.deepcopy(model.state_dict())
        elif epoch - best_epoch >= patience:
            break
    model.load_state_dict(best_state)
    return TrainResult(model=model, best_epoch=best_epoch, epochs_run=len(hist), val_accuracy=hist,
                       seconds=time.perf_counter() - t0)
