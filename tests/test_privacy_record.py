"""PrivacyRecord, NoisedBlock and Adjacency."""
import math
import json

import pytest
import torch

from torchdpgmm.privacy import Adjacency, NoisedBlock, PrivacyRecord


def test_adjacency_parse_and_string_equality():
    assert Adjacency.parse("add-remove") is Adjacency.ADD_REMOVE
    assert Adjacency.parse(Adjacency.LABEL_FLIP) is Adjacency.LABEL_FLIP
    assert Adjacency.REPLACE_ONE == "replace-one" and f"{Adjacency.REPLACE_ONE}" == "replace-one"
    for bad in ("add/remove", None, 3):
        with pytest.raises(ValueError, match="adjacency must be one of"):
            Adjacency.parse(bad)


def test_record_converts_adjacency_everywhere():
    r = PrivacyRecord(1.0, 1e-5, "label-flip", "basic", "as-published", "kl", {"eps0": 0.3}, ["caveat"])
    assert r.adjacency is Adjacency.LABEL_FLIP and r.blocks == () and r.covered is False
    assert r.notes == ("caveat",)
    legacy = PrivacyRecord(1.0, 0.0, "one record removed or replaced (Wu et al.)", "linear", "as-published")
    assert legacy.adjacency is Adjacency.REPLACE_ONE
    assert any("Wu et al." in n for n in legacy.notes)
    assert PrivacyRecord(1.0, 0.0, "one record removed (x)", "l", "m").adjacency is Adjacency.ADD_REMOVE
    with pytest.raises(ValueError, match="adjacency"):
        PrivacyRecord(1.0, 0.0, "something else", "l", "m")


def test_record_roundtrip_through_json():
    blocks = (NoisedBlock("sums", "gaussian", 2.0, 7.5), NoisedBlock("counts", "discrete-laplace", 2, 3.0, norm="l1"))
    r = PrivacyRecord(epsilon=torch.tensor(0.7), delta=1e-6, adjacency=Adjacency.REPLACE_ONE, accountant="GDP",
                      mode="sound", mechanism="kl", split={"sums": torch.tensor([0.4, 0.6])}, notes=("a", "b"),
                      blocks=blocks, covered=True)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["adjacency"] == "replace-one" and d["blocks"][0]["noise_scale"] == 7.5
    back = PrivacyRecord.from_dict(d)
    assert back.adjacency is Adjacency.REPLACE_ONE and back.blocks == blocks and back.covered is True
    assert back.epsilon == pytest.approx(0.7) and back.split["sums"] == pytest.approx([0.4, 0.6])
    assert back.notes == ("a", "b")
    with pytest.raises(ValueError, match="unknown"):
        PrivacyRecord.from_dict({**d, "extra": 1})
    old = {k: v for k, v in d.items() if k not in ("blocks", "covered")}
    assert PrivacyRecord.from_dict(old).blocks == ()


def test_repr_is_short_for_batched_records():
    eps = torch.linspace(0.1, 10, 1000)
    r = PrivacyRecord(eps, torch.full((1000,), 1e-5), "label-flip", "basic " * 40, "as-published", "kl",
                      split={"eps_k": torch.rand(1000, 5)}, notes=["x"] * 50)
    s = repr(r)
    assert len(s) < 400 and "shape=(1000,)" in s and "min=0.1" in s and "max=10" in s
    assert str(r) == s


@pytest.mark.parametrize("kw", [dict(mechanism="gauss"), dict(norm="l3"), dict(count=0), dict(sensitivity=-1.0),
                                dict(noise_scale=float("nan")), dict(sampling_rate=1.5)])
def test_noised_block_validation(kw):
    base = dict(name="b", mechanism="gaussian", sensitivity=1.0, noise_scale=1.0)
    with pytest.raises(ValueError):
        NoisedBlock(**{**base, **kw})


def test_sampler_tv_and_delta_sampler_closed_forms():
    """The discrete samplers' distance from exact draws (issue: records did not say so): sampler_tv of n draws equals
    tv_bound's chunk-by-chunk sum (computed here by its own loop), is below n 2^-64, adds over calls; a record's
    delta_sampler is (1 + e^eps) tv (scalar and batched); with_sampler_tv leaves ONE note; records without it keep
    their earlier dict."""
    import math

    import torch

    from torchdpgmm.mechanisms.discrete import add_noise_tv, sampler_tv, tv_bound
    from torchdpgmm.privacy.record import PrivacyRecord, sampler_delta, with_sampler_tv

    for n in (1, 1000, 65536, 3 * 65536 + 17):
        for kind, kw in (("gaussian", {"sigma": 3.7}), ("laplace", {"laplace_scale": 2.5})):
            got = sampler_tv(n, next(iter(kw.values())), kind)
            assert got == pytest.approx(tv_bound(n, **kw), rel=1e-12)
            assert 0 < got <= n * 2.0 ** -64
    assert sampler_tv(0, 1.0) == 0.0
    # draws of add_noise: every entry, or the upper triangle of a symmetric matrix
    x = torch.zeros(5, 3, 4, 4)
    assert add_noise_tv(x, 2.0, grid=0.5)[0] == 5 * 3 * 16
    n, tv = add_noise_tv(x, 2.0, grid=0.5, symmetric=True)
    assert n == 5 * 3 * 10 and tv == pytest.approx(tv_bound(150, sigma=4.0), rel=1e-12)
    rec = PrivacyRecord(1.0, 1e-6, "add-remove", "zCDP", "sound", "kl")
    assert rec.delta_sampler == 0.0 and "sampler_tv" not in rec.to_dict()
    r2 = with_sampler_tv(with_sampler_tv(rec, 1e-15, 10), 3e-15, 30)
    assert r2.sampler_tv == 3e-15 and r2.delta_sampler == pytest.approx((1 + math.e) * 3e-15, rel=1e-15)
    notes = [t for t in r2.notes if t.startswith("discrete samplers:")]
    assert len(notes) == 1 and "30 draws" in notes[0] and "delta + " in notes[0]
    assert PrivacyRecord.from_dict(r2.to_dict()).sampler_tv == 3e-15
    pure = with_sampler_tv(PrivacyRecord(2.0, 0.0, "add-remove", "basic", "sound", "laplace"), 1e-16, 4)
    assert "not pure epsilon-DP" in pure.notes[-1]
    eps = torch.tensor([0.5, 2.0], dtype=torch.float64)
    torch.testing.assert_close(sampler_delta(eps, 1e-15), (1 + torch.exp(eps)) * 1e-15)
    with pytest.raises(ValueError, match="sampler_tv"):
        PrivacyRecord(1.0, 1e-6, "add-remove", "zCDP", "sound", "kl", sampler_tv=-1.0)


@pytest.mark.parametrize("mechanism,ctype", [("kl", "full"), ("kl", "diag"), ("laplace", "full")])
def test_records_of_discrete_releases_state_the_samplers_tv(mechanism, ctype):
    """A sound release with the discrete samplers (the default noise) states sampler_tv: the sum over its blocks of
    tv_bound(draws of the block, the block's grid-unit scale), the draws counted here by hand (T trials x counts K,
    sums K d, second moments K d (d + 1) / 2 for a symmetric block, K d for diag); a Laplace record says it is not
    pure; the two-stage release adds its stages; continuous noise states nothing."""
    import torch

    from torchdpgmm.mechanisms.discrete import tv_bound
    from torchdpgmm.release.centring import release_centred
    from torchdpgmm.release.sound import release_sound

    g = torch.Generator().manual_seed(0)
    T, N, K, d = 3, 50, 2, 3
    X = torch.rand(T, N, d, dtype=torch.float64, generator=g)
    y = torch.randint(0, K, (T, N), generator=g)
    dlt = None if mechanism == "laplace" else 1e-5
    rel = release_sound(X, y, K, 1.0, dlt, clip_bound=1.0, mechanism=mechanism, covariance_type=ctype, generator=g)
    rec = rel.privacy
    draws = {"counts": T * K, "sums": T * K * d, "second_moments": T * K * (d * (d + 1) // 2 if ctype == "full" else d)}
    assert {b.name for b in rec.blocks} == set(draws)
    key = "laplace_scale" if mechanism == "laplace" else "sigma"
    ref = sum(tv_bound(draws[b.name], **{key: b.noise_scale}) for b in rec.blocks)
    assert rec.sampler_draws == sum(draws.values())
    assert rec.sampler_tv == pytest.approx(ref, rel=1e-6) and 0 < rec.sampler_tv <= rec.sampler_draws * 2.0 ** -64
    note = [n for n in rec.notes if n.startswith("discrete samplers:")]
    assert len(note) == 1 and ("not pure" in note[0]) == (mechanism == "laplace")
    assert rec.delta_sampler == pytest.approx((1 + math.exp(1.0)) * rec.sampler_tv, rel=1e-15)
    cont = release_sound(X, y, K, 1.0, dlt, clip_bound=1.0, mechanism=mechanism, covariance_type=ctype,
                         noise="continuous", generator=g).privacy
    assert cont.sampler_tv == 0.0 and cont.sampler_draws == 0 and "sampler_tv" not in cont.to_dict()
    two = release_centred(X[0], y[0], K, 1.0, dlt, clip_bound=0.5, ball_center=torch.full((d,), 0.5, dtype=torch.float64),
                          ball_radius=math.sqrt(d) / 2, mechanism=mechanism, covariance_type=ctype, generator=g).privacy
    centre = 1 + d + 1  # the centre stage: one count, d sums, one spherical second moment
    assert two.sampler_draws == centre + sum(draws.values()) // T
    assert sum(n.startswith("discrete samplers:") for n in two.notes) == 1
