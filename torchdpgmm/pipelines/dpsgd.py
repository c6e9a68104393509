"""DP-SGD baseline through Opacus (optional extra ``torchdpgmm[opacus]``).

The comparison a user would make against a DP-GMM release: train the same ``d -> 256 -> 128 -> 10``
MLP on the same PCA features with DP-SGD (per-example clipping to ``max_grad_norm``, Gaussian noise,
Poisson sampling, Opacus' accountant) at the same ``(epsilon, delta)``.

Not like for like (docs/privacy.md): DP-SGD protects *records* (add/remove one example), while the
as-published GMM release protects *labels* (flip one label) with a data-dependent calibration.
Tables that put them side by side must say so; the sound record-level release is DP-SGD's true rival.
Hyperparameters picked by looking at test accuracy are not privacy-accounted either (generous to DP-SGD).
"""
from __future__ import annotations

from typing import Sequence

import torch

__all__ = ["opacus_available", "opacus_version", "train_dpsgd"]


def opacus_available() -> bool:
    try:
        import opacus  # noqa: F401
    except Exception:
        return False
    return True


def opacus_version() -> str | None:
    try:
        import opacus

        return str(opacus.__version__)
    except Exception:
        return None


def train_dpsgd(
    X: torch.Tensor,
    y: torch.Tensor,
    X_test: torch.Tensor,
    y_test: torch.Tensor,
    epsilon: float,
    delta: float,
    epochs: int = 10,
    lr: float = 0.1,
    batch_size: int = 128,
    max_grad_norm: float = 1.0,
    hidden: Sequence[int] = (256, 128),
    num_classes: int = 10,
    seed: int = 0,
    eval_every: int | None = None,
    accountant: str = "rdp",
    n_public: float | None = None,
) -> dict:
    """Train one MLP with Opacus DP-SGD at ``(epsilon, delta)``; return accuracy curve and accounting.

    ``n_public`` (required): the public (or released, noisy) record count. The sampling rate, the number of
    steps (``dpsgd_schedule``, Abadi et al. 2016) and the update normaliser (the expected batch ``q * n_public``)
    come from it, never from the private N (the number of rows of ``X`` is private under the add/remove
    adjacency this function's accountant assumes); ``None`` is refused (``ValueError``). Rows with a non-finite feature or a label outside ``[0, num_classes)`` are
    never sampled (a dropped row is a removed one, as in the DP-GMM pipeline); nothing raises on them.
    Poisson sampling, per-example clipping and noise are Opacus' (``GradSampleModule`` + ``DPOptimizer``);
    the accountant prices ``steps`` Poisson-sampled Gaussian steps at rate ``q``.

    Returns ``{"iterations": [...], "accuracy": [...], "final_accuracy", "noise_multiplier",
    "epsilon_spent", "steps", "sampling_rate", "opacus"}``: no wall time (a timing of work on private data is
    a side channel and travels on nothing this returns; a study times the call itself). Raises ``ImportError`` if Opacus is
    missing. Randomness (initialisation, Poisson sampling, noise) comes from ``seed`` through a forked RNG.
    """
    from opacus import GradSampleModule
    from opacus.accountants import create_accountant
    from opacus.accountants.utils import get_noise_multiplier
    from opacus.optimizers import DPOptimizer

    from torchdpgmm._validation import check_delta, check_epsilon
    from torchdpgmm.pipelines.dpsgd_fast import dpsgd_schedule

    check_epsilon(epsilon)
    check_delta(delta)
    if n_public is None:
        raise ValueError("n_public is required: the public (or released, noisy) record count that sets DP-SGD's "
                         "sampling rate, steps and normaliser, never the private number of rows")
    X = X.to(torch.float32).cpu()  # Opacus runs on the CPU here, with CPU generators (the generator rule)
    Xt = X_test.to(torch.float32).cpu()
    y = y.to(torch.int64).cpu()
    yt = y_test.to(torch.int64).cpu()
    # rows that are not a finite record of a public class are never sampled (no branch, no raise on them)
    usable = torch.isfinite(X).all(-1) & (y >= 0) & (y < num_classes)
    X = torch.where(usable.unsqueeze(-1), X, torch.zeros((), dtype=X.dtype))
    y = torch.where(usable, y, torch.zeros_like(y))
    q, steps = dpsgd_schedule(float(n_public), int(batch_size), float(epochs))
    import warnings

    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        # Opacus warns about its insecure RNG and full backward hooks on every run: not actionable here
        warnings.simplefilter("ignore")
        torch.manual_seed(seed)
        sizes = [X.shape[1], *hidden, num_classes]
        layers: list[torch.nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(torch.nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
        net = torch.nn.Sequential(*layers)
        model = GradSampleModule(net, loss_reduction="sum")
        sigma = float(get_noise_multiplier(target_epsilon=float(epsilon), target_delta=float(delta), sample_rate=q,
                                           steps=steps, accountant=accountant))
        gen = torch.Generator().manual_seed(seed + 1)
        # clipped, noised gradient sum divided by the expected batch q * n_public (a public number)
        expected = max(1.0, q * float(n_public))
        opt = DPOptimizer(torch.optim.SGD(model.parameters(), lr=lr), noise_multiplier=sigma,
                          max_grad_norm=float(max_grad_norm), expected_batch_size=max(1, round(expected)),
                          loss_reduction="mean", generator=gen)
        acct = create_accountant(accountant)
        sampler = torch.Generator().manual_seed(seed + 2)

        def acc() -> float:
            with torch.no_grad():
                return float((net(Xt).argmax(-1) == yt).to(torch.float64).mean())

        its, accs = _poisson_steps(model, opt, acct, X, y, usable, q, sigma, steps, sampler, eval_every, acc)
        spent = float(acct.get_epsilon(float(delta)))
    return {
        "iterations": its,
        "accuracy": accs,
        "final_accuracy": accs[-1],
        "noise_multiplier": sigma,
        "epsilon_spent": spent,
        "steps": steps,
        "sampling_rate": q,
        "opacus": opacus_version(),
        "adjacency": "record (add/remove one example; Poisson sampling)",
    }


def _poisson_steps(model, opt, acct, X, y, usable, q, sigma, steps, sampler, eval_every, acc):
    """The DP-SGD steps of :func:`train_dpsgd`: Poisson sampling at rate ``q`` over the usable rows, Opacus'
    clipped and noised step, the accountant's record; returns the evaluated iterations and accuracies."""
    its, accs = [0], [acc()]
    lossf = torch.nn.CrossEntropyLoss(reduction="none")
    pad_x, pad_y = torch.zeros(1, X.shape[1]), torch.zeros(1, dtype=torch.int64)
    for step in range(1, steps + 1):
        take = (torch.rand(X.shape[0], generator=sampler, device="cpu") < q) & usable  # Poisson sampling over usable rows
        idx = take.nonzero().squeeze(-1)
        opt.zero_grad()
        # one zero-weighted padding row: an empty batch needs no branch (its step is noise only)
        xb, yb = torch.cat([X[idx], pad_x]), torch.cat([y[idx], pad_y])
        w = torch.cat([torch.ones(idx.shape[0]), torch.zeros(1)])
        (w * lossf(model(xb), yb)).sum().backward()  # per-example gradients of the summed loss
        opt.step()
        acct.step(noise_multiplier=sigma, sample_rate=q)
        if eval_every and step % eval_every == 0:
            its.append(step)
            accs.append(acc())
    if its[-1] != steps:
        its.append(steps)
        accs.append(acc())
    return its, accs
