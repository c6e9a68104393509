"""The generator rule (docs/architecture.md, "Devices and generators").

A ``torch.Generator`` lives on the device of the tensors it draws: a CUDA generator draws CUDA tensors
(noise, synthetic samples, device-side minibatch orders), a CPU generator draws CPU tensors. Host-side
draws (a seed for ``torch.nn`` initialisation, a permutation or split of rows that are indexed on the host,
a bootstrap index on the host) use a CPU generator derived from the same seed, never the device generator
in a CPU op (on CUDA that is ``RuntimeError: Expected a 'cpu' device type for generator but found 'cuda'``).

* A study's two generators from one seed: :meth:`torchdpgmm.experiments.ExperimentConfig.generator` (on the
  study's device) and :meth:`~torchdpgmm.experiments.ExperimentConfig.host_generator` (on the CPU, the same
  seed: a CPU run draws what it drew before the rule).
* :func:`draw_seed` / :func:`derive_host_generator`: inside a function that was handed one generator, a
  seed (or a CPU generator) drawn from it ON ITS OWN DEVICE; one host read per call, never in a hot loop.
"""
from __future__ import annotations

import torch

__all__ = ["draw_seed", "derive_host_generator", "generator_device", "check_generator_device"]


def generator_device(generator: torch.Generator | None) -> torch.device:
    """The device a generator draws on (``None``: the CPU default generator)."""
    return torch.device("cpu") if generator is None else torch.device(generator.device)


def draw_seed(generator: torch.Generator | None) -> int:
    """A seed in ``[0, 2^31 - 1)`` drawn from ``generator`` on its own device (one host read)."""
    dev = generator_device(generator)
    return int(torch.randint(0, 2**31 - 1, (1,), generator=generator, device=dev).cpu())


def derive_host_generator(generator: torch.Generator | None) -> torch.Generator:
    """A CPU generator seeded by one draw of ``generator`` on its own device (successive calls with the same
    generator give different host streams)."""
    return torch.Generator().manual_seed(draw_seed(generator))


def check_generator_device(generator: torch.Generator | None, device) -> None:
    """Refuse, in one line (``ValueError``), a generator that does not live on ``device`` (the device of the
    tensors it is about to draw); ``None`` (the default generators) always passes. A public check."""
    if generator is None:
        return
    want, have = torch.device(device), generator_device(generator)
    if want.type != have.type or (want.index is not None and have.index is not None and want.index != have.index):
        raise ValueError(f"the generator lives on {have} but draws tensors on {want}: pass "
                         f"torch.Generator(device={str(want)!r}) (a generator lives on the device of what it draws)")
