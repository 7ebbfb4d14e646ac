"""V-trace's and Retrace's scalars on every Triton strategy, under the interpreter.

The other kernel tests keep ``rho_bar = c_bar = 1``, where a swap of the two clip
levels changes nothing. Here they are unequal and away from 1, in both orders, and
gamma and lambda are away from their defaults: the importance ratios (about 0.2 to 6)
cross both levels, so a scalar read in the wrong place anywhere between the public
call and the builders' ``_clip`` calls is an error of order 1.

V-trace's advantage comes from ``(D[t] - delta[t]) / c[t]`` where its builder serves the
scalars (``vtrace_by_division_serves``) and from the core's ``D[t+1]`` elsewhere: both
finishes are checked at the edges of that rule.
"""

from __future__ import annotations

import pytest
import torch

from rltriton_tune.algorithms import ALGORITHMS
from rltriton_tune.call import ProblemKey
from rltriton_tune.estimators import ESTIMATORS
from rltriton_tune.kernels import STRATEGY_NAMES, strategies
from rltriton_tune.kernels.builders import BUILDERS, VTRACE_BAR_RATIO, vtrace_by_division_serves

from .cases import check_outputs, expected, make_call, small_params

pytestmark = pytest.mark.skipif(not strategies(), reason="Triton is not installed")

#: Two scalar sets: the clip levels in both orders, gamma and lambda off their defaults.
SCALARS = (
    {"rho_bar": 1.7, "c_bar": 0.6, "gamma": 0.9, "lambda_": 0.8},
    {"rho_bar": 0.6, "c_bar": 1.7, "gamma": 0.8, "lambda_": 0.6},
)
#: V-trace with bootstrap values and truncations in one set, a last value in the other.
VTRACE_FLAGS = ("bootstrap+trunc", "last_value")
#: 2 row groups of 2, and 3-5 tiles or chunks per row with the strategies' small blocks.
N, T = 3, 9


def _key(algorithm: str, layout: str, which: int, dtype: str = "float32") -> ProblemKey:
    flags = VTRACE_FLAGS[which] if algorithm == "vtrace" else "trunc"
    return ProblemKey(algorithm, N, T, dtype, layout, flags, a=5 if algorithm == "retrace" else 0)


def _scalars(algorithm: str, which: int) -> dict[str, float]:
    """The scalars of set ``which`` that ``algorithm`` takes."""
    return {name: SCALARS[which][name] for name in ALGORITHMS[algorithm].scalars}


@pytest.mark.parametrize(("layout", "which"), [("env", 0), ("time", 1)],
                         ids=["env-rho>c", "time-c>rho"])
@pytest.mark.parametrize("algorithm", ["vtrace", "retrace"])
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_clip_levels_gamma_and_lambda(strategy, algorithm, layout, which):
    """Each strategy and estimator, on both layouts, with each order of the clip levels."""
    key = _key(algorithm, layout, which)
    call, kwargs = make_call(key, seed=11 + which, **_scalars(algorithm, which))
    params = small_params(strategy, key.t)
    outs = strategies()[strategy].prepare(key, params)(call)
    check_outputs(outs, expected(algorithm, kwargs), call,
                  f"{strategy} {params} {key.as_text()} {_scalars(algorithm, which)}")


@pytest.mark.parametrize(("strategy", "algorithm"), [
    (strategy, ("vtrace", "retrace")[i % 2]) for i, strategy in enumerate(STRATEGY_NAMES)])
def test_scalars_through_the_public_function(strategy, algorithm):
    """The same through ``force`` (each strategy once, the estimators taking turns):
    keyword scalars reach the kernel in their places."""
    from rltriton_tune import force

    key = _key(algorithm, "env", 0, "bfloat16")
    call, kwargs = make_call(key, seed=5, **_scalars(algorithm, 0))
    with force(strategy, **small_params(strategy, key.t)):
        outs = ESTIMATORS[algorithm](**kwargs)
    check_outputs(outs, expected(algorithm, kwargs), call, f"{strategy} {key.as_text()}")


@pytest.mark.parametrize("algorithm", ["vtrace", "retrace"])
def test_the_scalar_sets_tell_a_swap(algorithm):
    """The cases above can fail: with rho_bar and c_bar swapped (or gamma and lambda for
    Retrace) the reference moves far outside any dtype's tolerance."""
    for which in (0, 1):
        _, kwargs = make_call(_key(algorithm, "env", which), seed=11 + which,
                              **_scalars(algorithm, which))
        right = expected(algorithm, kwargs)
        swaps = [("rho_bar", "c_bar")] + ([("gamma", "lambda_")] if algorithm == "retrace"
                                          else [])
        for x, y in swaps:
            wrong = expected(algorithm, dict(kwargs, **{x: kwargs[y], y: kwargs[x]}))
            gap = max(float((w - r).abs().max()) for w, r in zip(wrong, right, strict=True))
            assert gap > 0.3, (which, x, y, gap)
        assert all(torch.isfinite(r).all() for r in right)


INF = float("inf")


def test_division_finish_serves_finite_positive_c_bar_within_the_bar_ratio():
    serves = BUILDERS["vtrace"].serves
    assert serves is vtrace_by_division_serves
    assert serves(0.99, 1.0, 1.0) and serves(0.99, VTRACE_BAR_RATIO, 1.0)
    assert serves(0.99, 0.0, 1e-3) and serves(0.99, 0.6, 1.7)
    assert not serves(0.99, 1.0, 0.0)                          # c = 0 loses D[t+1]
    assert not serves(0.99, 1.0, INF)                          # so does c = inf
    assert not serves(0.99, 2 * VTRACE_BAR_RATIO, 1.0)         # rounding scaled too far
    assert not serves(0.99, -1.0, 1.0) and not serves(0.99, 1.0, -1.0)
    assert not serves(INF, 1.0, 1.0) and serves(0.0, 1.0, 1.0)     # D[t] NaN at gamma = inf
    assert serves(0.99, 1.0, 3e38) and not serves(0.99, 1.0, 1e39)  # inf in float32


#: (rho_bar, c_bar): served by the division finish (the first three), then by the exact
#: one. The ratios run from about 0.2 to 6, so each level is crossed.
BARS = ((1.0, 1.0), (VTRACE_BAR_RATIO * 0.25, 0.25), (0.0, 0.5),
        (1.0, 0.0), (1.0, INF), (INF, INF), (100.0, 1e-3))


@pytest.mark.parametrize(("rho_bar", "c_bar"), BARS)
@pytest.mark.parametrize(("strategy", "layout", "which"), [
    ("flat", "env", 0), ("tiled", "time", 1), ("split", "env", 1), ("lookback", "time", 0)])
def test_vtrace_finishes_at_the_edges_of_the_division_rule(strategy, layout, which, rho_bar,
                                                           c_bar):
    key = _key("vtrace", layout, which)
    call, kwargs = make_call(key, seed=3 + which, gamma=0.9, rho_bar=rho_bar, c_bar=c_bar)
    params = small_params(strategy, key.t)
    outs = strategies()[strategy].prepare(key, params)(call)
    check_outputs(outs, expected("vtrace", kwargs), call,
                  f"{strategy} {key.as_text()} rho_bar={rho_bar} c_bar={c_bar}")


def test_the_exact_finish_is_needed_where_the_rule_refuses():
    """The cases above can fail: the division finish forced onto bars its rule refuses
    (c_bar = 0: the advantage loses D[t+1] entirely) misses the reference."""
    key = _key("vtrace", "env", 0)
    call, kwargs = make_call(key, seed=3, gamma=0.9, rho_bar=1.0, c_bar=0.0)
    flat = strategies()["flat"]
    division = flat._launcher(key, flat.validate(key, small_params("flat", key.t)),
                              BUILDERS["vtrace"])
    with pytest.raises(AssertionError):
        check_outputs(division(call), expected("vtrace", kwargs), call, "division at c_bar=0")


def test_a_failing_exact_finish_leaves_those_calls_to_torch():
    """The exact finish is compiled at the first call it serves, which can come at any
    step of a run: where it fails, those calls take the torch implementation with a
    warning (once), and the calls the division serves keep their kernel."""
    import warnings

    from rltriton_tune.kernels.launch import by_scalars

    key = _key("vtrace", "env", 0)
    flat = strategies()["flat"]
    params = flat.validate(key, small_params("flat", key.t))
    built = []

    def broken():
        built.append(1)
        raise RuntimeError("out of resources: shared memory")

    launcher = by_scalars(key, BUILDERS["vtrace"],
                          flat._launcher(key, params, BUILDERS["vtrace"]), broken)
    for c_bar, warns in ((INF, True), (INF, False), (1.0, False)):
        call, kwargs = make_call(key, seed=3, rho_bar=1.0, c_bar=c_bar)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs = launcher(call)
        assert any("torch implementation" in str(w.message) for w in caught) == warns
        check_outputs(outs, expected("vtrace", kwargs), call, f"c_bar={c_bar}")
    assert built == [1]
