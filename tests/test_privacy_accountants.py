"""Accountants and odometer vs dp-accounting computed independently (its DpEvent API)."""
import math

import pytest

pytest.importorskip("dp_accounting")
import dp_accounting as dpa  # noqa: E402

from torchdpgmm import privacy as P  # noqa: E402

# the Gaussian blocks of a sound replace-one release at (eps, delta) = (1, 1e-5), B = 1, split 0.1/0.45/0.45
_MU = P.gdp_mu(1.0, 1e-5)
SOUND_BLOCKS = [
    P.NoisedBlock("counts", "gaussian", math.sqrt(2), math.sqrt(2) / (_MU * math.sqrt(0.10))),
    P.NoisedBlock("sums", "gaussian", 2.0, 2.0 / (_MU * math.sqrt(0.45))),
    P.NoisedBlock("second_moments", "gaussian", math.sqrt(2), math.sqrt(2) / (_MU * math.sqrt(0.45)), norm="frobenius"),
]


def _sound_record(**kw):
    base = dict(epsilon=1.0, delta=1e-5, adjacency="replace-one", accountant="GDP", mode="sound",
                mechanism="gaussian", blocks=tuple(SOUND_BLOCKS), covered=True)
    base.update(kw)
    return P.PrivacyRecord(**base)


def test_sound_release_plus_dpsgd_matches_dp_accounting_pld():
    q, nm, steps, delta = 0.01, 1.1, 1000, 1e-5
    acc = P.PLDAccountant(adjacency="add-remove")
    for e, c in P.events_from_blocks(SOUND_BLOCKS):
        acc.compose(e, c)
    acc.compose(P.SubsampledGaussianEvent(nm, q, steps))
    ours = acc.get_epsilon(delta)

    ref = dpa.pld.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    for b in SOUND_BLOCKS:
        ref.compose(dpa.GaussianDpEvent(b.noise_scale / b.sensitivity))
    ref.compose(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(nm)), steps))
    expected = ref.get_epsilon(delta)
    assert abs(ours - expected) < 1e-3
    # and it is strictly more than either part alone
    dpsgd = dpa.pld.PLDAccountant().compose(
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(nm)), steps)).get_epsilon(delta)
    assert ours > dpsgd + 0.1


def test_gdp_and_pld_agree_on_gaussian_only_compositions():
    gdp, pld = P.GDPAccountant(), P.PLDAccountant()
    for e, c in P.events_from_blocks(SOUND_BLOCKS):
        gdp.compose(e, c)
        pld.compose(e, c)
    # the three blocks were calibrated to exactly (1, 1e-5) by GDP
    assert gdp.get_epsilon(1e-5) == pytest.approx(1.0, abs=1e-9)
    assert pld.get_epsilon(1e-5) == pytest.approx(gdp.get_epsilon(1e-5), abs=2e-3)
    gdp.compose(P.GaussianEvent(1.0, 3.0), count=7)
    pld.compose(P.GaussianEvent(1.0, 3.0), count=7)
    assert pld.get_epsilon(1e-6) == pytest.approx(gdp.get_epsilon(1e-6), abs=2e-3)
    assert pld.get_delta(1.5) == pytest.approx(gdp.get_delta(1.5), rel=1e-2)


def test_rdp_cross_check_is_an_upper_bound_and_matches_dp_accounting():
    rdp, pld = P.RDPAccountant(), P.PLDAccountant()
    ev = P.ComposedEvent((P.GaussianEvent(2.0, 5.0), P.LaplaceEvent(1.0, 4.0), P.SubsampledGaussianEvent(1.0, 0.02, 200)))
    rdp.compose(ev)
    pld.compose(ev)
    ref = dpa.rdp.RdpAccountant()
    ref.compose(dpa.GaussianDpEvent(2.5)).compose(dpa.LaplaceDpEvent(4.0))
    ref.compose(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.02, dpa.GaussianDpEvent(1.0)), 200))
    assert rdp.get_epsilon(1e-5) == pytest.approx(ref.get_epsilon(1e-5), rel=1e-12)
    assert pld.get_epsilon(1e-5) <= rdp.get_epsilon(1e-5)


def test_laplace_pld_is_pure_dp():
    acc = P.PLDAccountant().compose(P.LaplaceEvent(2.0, 4.0), count=3)  # 3 x 0.5-DP
    assert acc.get_epsilon(1e-9) <= 1.5 + 1e-3
    assert acc.get_delta(1.5 + 1e-3) == pytest.approx(0.0, abs=1e-9)


def test_gdp_refuses_non_gaussian_events():
    with pytest.raises(TypeError, match="Gaussian"):
        P.GDPAccountant().compose(P.LaplaceEvent(1.0, 1.0))
    with pytest.raises(TypeError):
        P.PLDAccountant().compose("gaussian")


def test_odometer_spends_and_refuses_without_recording():
    odo = P.BudgetOdometer(2.5, 1e-5, adjacency="replace-one")
    e1 = odo.spend(_sound_record())
    assert e1 == pytest.approx(1.0, abs=2e-3)
    e2 = odo.spend(_sound_record())
    # two identical mu-GDP releases are sqrt(2) mu-GDP (independent check with dp-accounting's PLD)
    ref = dpa.pld.PLDAccountant()
    for _ in range(2):
        for b in SOUND_BLOCKS:
            ref.compose(dpa.GaussianDpEvent(b.noise_scale / b.sensitivity))
    assert e2 == pytest.approx(ref.get_epsilon(1e-5), abs=1e-3)
    assert 1.0 < e2 < 2.0  # tighter than basic composition
    with pytest.raises(P.BudgetExceededError, match="budget"):
        odo.spend(_sound_record(blocks=tuple(SOUND_BLOCKS) * 6))
    assert len(odo.history) == 2 and odo.epsilon_spent() == pytest.approx(e2)
    assert odo.epsilon_spent(delta=1e-3) < e2


def test_odometer_refuses_uncovered_and_mismatched_records():
    odo = P.BudgetOdometer(10.0, 1e-5, adjacency="replace-one")
    with pytest.raises(ValueError, match="not covered"):
        odo.spend(_sound_record(covered=False, mode="as-published"))
    with pytest.raises(ValueError, match="adjacency"):
        odo.spend(_sound_record(adjacency="add-remove"))
    wish = P.NoisedBlock("covariances", "wishart", 1.0, 1.0)
    with pytest.raises(TypeError, match="no DP accounting"):
        odo.spend(_sound_record(blocks=(wish,)))
    assert odo.epsilon_spent() == 0.0 and odo.history == []
    # a record without blocks is spent at its stated (epsilon, delta)
    odo.spend(_sound_record(blocks=(), epsilon=0.5, delta=0.0))
    assert odo.epsilon_spent() == pytest.approx(0.5, abs=2e-3)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf")])
def test_odometer_bad_budget(bad):
    with pytest.raises(ValueError, match="epsilon_budget"):
        P.BudgetOdometer(bad, 1e-5)


def test_odometer_falls_back_to_the_stated_guarantee_for_unpriced_blocks():
    dg = P.NoisedBlock("sums", "discrete-gaussian", 3.0, 9.0)
    odo = P.BudgetOdometer(5.0, 1e-5, adjacency="replace-one")
    eps = odo.spend(_sound_record(blocks=(dg,), epsilon=0.8, delta=1e-6))
    assert eps == pytest.approx(0.8, abs=5e-3)  # PLD of an (0.8, 1e-6)-DP event at delta = 1e-5
    z = P.BudgetOdometer(5.0, 1e-5, accountant="zcdp", adjacency="replace-one")
    assert z.spend(_sound_record(blocks=(dg,))) == pytest.approx(P.zcdp_epsilon(9.0 / (2 * 81.0), 1e-5), rel=1e-9)


def test_subsampled_replace_one_matches_dp_accounting_and_rdp_refuses():
    ev = P.SubsampledGaussianEvent(1.1, 0.01, 100)
    ours = P.PLDAccountant(adjacency="replace-one").compose(ev).get_epsilon(1e-5)
    ref = dpa.pld.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE).compose(
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.1)), 100)).get_epsilon(1e-5)
    assert abs(ours - ref) < 1e-3
    assert ours > P.PLDAccountant().compose(ev).get_epsilon(1e-5)  # replace-one costs more than add-remove
    with pytest.raises(TypeError, match="add-remove"):
        P.RDPAccountant(adjacency="replace-one").compose(ev)
    rec = P.PrivacyRecord(1.0, 1e-5, "add-remove", "PLD", "sound", blocks=SOUND_BLOCKS[:1], covered=True)
    assert rec.events() == [(P.GaussianEvent(SOUND_BLOCKS[0].sensitivity, SOUND_BLOCKS[0].noise_scale), 1)]


@pytest.mark.parametrize("kind,acc", [("gdp", P.GDPAccountant), ("zcdp", P.ZCDPAccountant)])
def test_block_sigmas_spend_exactly_the_budget(kind, acc):
    sens = {"counts": math.sqrt(2), "sums": 2.0, "second_moments": math.sqrt(2)}
    split = {"counts": 1.0, "sums": 4.5, "second_moments": 4.5}
    sig = P.block_sigmas(1.0, 1e-5, sens, split, accountant=kind)
    a = acc()
    for b in sens:
        a.compose(P.GaussianEvent(sens[b], sig[b]))
    assert a.get_epsilon(1e-5) == pytest.approx(1.0, abs=1e-6)
    if kind == "gdp":  # the continuous sound release's calibration, checked by dp-accounting's PLD
        ref = dpa.pld.PLDAccountant()
        for b in sens:
            ref.compose(dpa.GaussianDpEvent(sig[b] / sens[b]))
        assert ref.get_epsilon(1e-5) == pytest.approx(1.0, abs=2e-3)
    with pytest.raises(ValueError, match="split"):
        P.block_sigmas(1.0, 1e-5, sens, {"counts": 1.0})


def test_pld_composes_each_spend_once_with_the_numbers_of_composing_the_whole_ledger(monkeypatch):
    """An odometer spending n times built the PLD of every earlier event again at each spend (n^2 / 2 event PLDs;
    the budget page's example of 11 spends built 165). Each event's PLD is now built once and folded onto the kept
    composition, in ledger order, which is the same left fold as composing the ledger at once; checked against a
    fresh accountant (the whole ledger) and against dp-accounting's own PLD composition of the same events."""
    events = [P.GaussianEvent(1.0, s) for s in (2.0, 3.0, 5.0, 2.5)] + [P.LaplaceEvent(1.0, 4.0)]
    built = []
    real = P.PLDAccountant._event_pld
    monkeypatch.setattr(P.PLDAccountant, "_event_pld", lambda self, e: built.append(e) or real(self, e))
    odo = P.BudgetOdometer(100.0, 1e-5, accountant="pld")
    after = [odo.spend(e) for e in events]
    assert len(built) == len(events)  # one PLD per spent event (the trial's copy is the one kept)
    whole = P.PLDAccountant()
    for e in events:
        whole.compose(e)
    assert whole.get_epsilon(1e-5) == after[-1] == odo.epsilon_spent()
    assert all(a < b for a, b in zip(after, after[1:]))
    ref = dpa.pld.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    for e in events[:4]:
        ref.compose(dpa.GaussianDpEvent(e.sigma / e.sensitivity))
    ref.compose(dpa.LaplaceDpEvent(4.0 / 1.0))
    assert abs(after[-1] - ref.get_epsilon(1e-5)) < 1e-3


def test_pld_fold_survives_an_interruption_and_follows_a_changed_ledger(monkeypatch):
    """The incremental fold kept its PLD and its count of folded entries apart: a fold interrupted while building
    an event's PLD (Ctrl-C, MemoryError) left the earlier new entries in the PLD but not in the count, and the next
    call composed them twice (found by review: 3.30 for 2.45). Likewise a ledger changed by hand (it is public) or a
    changed discretisation gave a stale fold. Each case must give what a fresh accountant of the same ledger gives."""
    def fresh(ledger, **kw):
        acc = P.PLDAccountant(**kw)
        for e, c in ledger:
            acc.compose(e, c)
        return acc.get_epsilon(1e-5)

    a, b = P.GaussianEvent(1.0, 2.0), P.GaussianEvent(1.0, 3.0)
    acc = P.PLDAccountant()
    acc.compose(a).compose(b)
    real = P.PLDAccountant._event_pld
    calls = []

    def interrupted(self, e):
        calls.append(e)
        if e is b and len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, e)
    monkeypatch.setattr(P.PLDAccountant, "_event_pld", interrupted)
    with pytest.raises(KeyboardInterrupt):
        acc.get_epsilon(1e-5)
    monkeypatch.setattr(P.PLDAccountant, "_event_pld", real)
    assert acc.get_epsilon(1e-5) == fresh([(a, 1), (b, 1)])

    acc.ledger.clear()
    acc.compose(P.GaussianEvent(1.0, 100.0))
    assert acc.get_epsilon(1e-5) == fresh([(P.GaussianEvent(1.0, 100.0), 1)])
    acc.value_discretization_interval = 1e-3
    assert acc.get_epsilon(1e-5) == fresh([(P.GaussianEvent(1.0, 100.0), 1)], value_discretization_interval=1e-3)
