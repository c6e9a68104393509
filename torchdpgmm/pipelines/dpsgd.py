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

import time
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
) -> dict:
    """Train one MLP with Opacus DP-SGD at ``(epsilon, delta)``; return accuracy curve and accounting.

    Returns ``{"iterations": [...], "accuracy": [...], "final_accuracy", "noise_multiplier",
    "epsilon_spent", "steps", "seconds", "opacus"}``. Raises ``ImportError`` if Opacus is missing.
    Randomness (initialisation, Poisson sampling, noise) comes from ``seed`` through a forked RNG.
    """
    from opacus import PrivacyEngine

    from torchdpgmm._validation import check_delta, check_epsilon

    check_epsilon(epsilon)
    check_delta(delta)
    t0 = time.perf_counter()
    X = X.to(torch.float32).cpu()
    Xt = X_test.to(torch.float32).cpu()
    y = y.to(torch.int64).cpu()
    yt = y_test.to(torch.int64).cpu()
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
        model = torch.nn.Sequential(*layers)
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=batch_size, shuffle=True)
        gen = torch.Generator().manual_seed(seed + 1)
        engine = PrivacyEngine(accountant=accountant)
        model, opt, loader = engine.make_private_with_epsilon(
            module=model,
            optimizer=opt,
            data_loader=loader,
            target_epsilon=float(epsilon),
            target_delta=float(delta),
            epochs=int(epochs),
            max_grad_norm=float(max_grad_norm),
            noise_generator=gen,
        )

        def acc() -> float:
            with torch.no_grad():
                return float((model(Xt).argmax(-1) == yt).to(torch.float64).mean())

        its, accs = [0], [acc()]
        step = 0
        lossf = torch.nn.CrossEntropyLoss()
        for _ in range(int(epochs)):
            for xb, yb in loader:
                if xb.shape[0] == 0:  # Poisson sampling can draw an empty batch
                    continue
                opt.zero_grad()
                lossf(model(xb), yb).backward()
                opt.step()
                step += 1
                if eval_every and step % eval_every == 0:
                    its.append(step)
                    accs.append(acc())
        if its[-1] != step:
            its.append(step)
            accs.append(acc())
        spent = float(engine.get_epsilon(float(delta)))
    return {
        "iterations": its,
        "accuracy": accs,
        "final_accuracy": accs[-1],
        "noise_multiplier": float(opt.noise_multiplier),
        "epsilon_spent": spent,
        "steps": step,
        "seconds": time.perf_counter() - t0,
        "opacus": opacus_version(),
        "adjacency": "record (add/remove one example; Poisson sampling)",
    }
