"""Privacy accounting: adjacency, events, calibrations, accountants, records and a budget odometer.

The split follows Opacus: events are values (:mod:`~torchdpgmm.privacy.events`), pure functions
calibrate noise (:mod:`~torchdpgmm.privacy.calibration`, torch, batched), accountants compose events
(:mod:`~torchdpgmm.privacy.accountants`), and every release carries one typed
:class:`~torchdpgmm.privacy.record.PrivacyRecord` with one :class:`NoisedBlock` per noised statistic.
"""
from torchdpgmm.privacy.accountants import (
    Accountant,
    GDPAccountant,
    PLDAccountant,
    RDPAccountant,
    ZCDPAccountant,
    make_accountant,
)
from torchdpgmm.privacy.adjacency import Adjacency
from torchdpgmm.privacy.calibration import (
    analytic_gaussian_sigma,
    block_sigmas,
    GAUSSIAN_RULES,
    classical_gaussian_sigma,
    gaussian_delta,
    gaussian_sigma,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    laplace_scale,
    paper_gaussian_sigma,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_rho,
)
from torchdpgmm.privacy.events import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    SubsampledGaussianEvent,
    events_from_blocks,
)
from torchdpgmm.privacy.odometer import BudgetExceededError, BudgetOdometer
from torchdpgmm.privacy.record import NoisedBlock, PrivacyRecord

__all__ = [
    "Adjacency", "NoisedBlock", "PrivacyRecord",
    "PrivacyEvent", "GaussianEvent", "LaplaceEvent", "SubsampledGaussianEvent", "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent", "ApproxDPEvent", "ComposedEvent", "events_from_blocks",
    "Accountant", "GDPAccountant", "ZCDPAccountant", "PLDAccountant", "RDPAccountant", "make_accountant",
    "BudgetOdometer", "BudgetExceededError",
    "gdp_delta", "gdp_epsilon", "gdp_mu", "gaussian_delta", "analytic_gaussian_sigma", "laplace_scale",
    "paper_gaussian_sigma", "classical_gaussian_sigma", "gaussian_sigma", "GAUSSIAN_RULES", "zcdp_delta", "zcdp_epsilon", "zcdp_rho", "block_sigmas",
]
