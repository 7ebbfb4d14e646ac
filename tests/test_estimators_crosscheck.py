"""Randomized cross-checks of every public estimator against the float64 reference.

Every flag combination, both layouts, odd shapes (N = 1, T = 1, primes,
non-powers of two), every floating dtype, flag dtypes, and one T = 10^5 case per
estimator; all on CPU through whatever implementation dispatch picks.
"""

from itertools import combinations

import pytest
import torch

from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES, FLAG_NAMES, STARTS_AT
from rltriton_tune.call import ProblemKey, flags_string
from rltriton_tune.estimators import ESTIMATORS
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference

#: Norm-relative error bound per dtype (SPEC / issue 2; float16 by its 11-bit mantissa).
TOLERANCE = {"float32": 2e-5, "float64": 1e-9, "float16": 3e-3, "bfloat16": 3e-2}

ODD_SHAPES = [(1, 1), (1, 13), (7, 1), (3, 5), (17, 31), (6, 100)]


def flag_sets(algorithm):
    """Every valid combination of optional inputs (and the prefix-sum boundary)."""
    spec = ALGORITHMS[algorithm]
    options = [FLAG_NAMES[name] for name in spec.optional]
    found = []
    for k in range(len(options) + 1):
        for chosen in combinations(options, k):
            chosen = set(chosen)
            if "last_value" in chosen and chosen & {"bootstrap", "trunc"}:
                continue  # SPEC: an error, tested elsewhere
            if "next" in chosen and chosen & {"bootstrap", "last_value"}:
                continue  # next_values excludes both: an error, tested elsewhere
            found.append(chosen)
    if algorithm == "episodic_prefix_sum":
        found += [flags | {STARTS_AT} for flags in found]
    return [flags_string(flags) for flags in found]


CASES = [(algorithm, flags) for algorithm in ESTIMATOR_NAMES for flags in flag_sets(algorithm)]


def relative_error(got, want):
    """Norm-relative error of ``got`` against the float64 ``want`` (NaN-free inputs)."""
    got = got.detach().to("cpu", torch.float64)
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def as_tuple(outputs):
    return outputs if isinstance(outputs, tuple) else (outputs,)


def check_against_reference(key, seed=0, flag_dtype=torch.float32):
    kwargs = random_inputs(key, seed=seed, flag_dtype=flag_dtype)
    got = as_tuple(ESTIMATORS[key.algorithm](**kwargs))
    want = as_tuple(reference(key.algorithm, **kwargs))
    assert len(got) == len(want) == len(key.spec.outputs)
    expected_shape = (key.t, key.n) if key.time_major else (key.n, key.t)
    out_dtype = kwargs[key.spec.first_float].dtype
    for name, g, w in zip(key.spec.outputs, got, want, strict=True):
        assert g.shape == expected_shape, (name, g.shape)
        assert g.dtype == out_dtype, (name, g.dtype)
        error = relative_error(g, w)
        assert error <= TOLERANCE[key.dtype], f"{key.as_text()} {name}: relative error {error:.3g}"


@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize(("algorithm", "flags"), CASES)
def test_every_flag_combination_and_odd_shape(algorithm, flags, layout):
    a = 5 if algorithm == "retrace" else 0
    for seed, (n, t) in enumerate(ODD_SHAPES):
        key = ProblemKey(algorithm, n, t, "float32", layout, flags, a)
        check_against_reference(key, seed=seed)


def all_flags(algorithm):
    """The richest valid flag set of ``algorithm`` (truncations and bootstrap values)."""
    return max(flag_sets(algorithm), key=lambda text: len(text.split("+")) - ("last" in text))


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_dtypes(algorithm, dtype):
    a = 3 if algorithm == "retrace" else 0
    for layout in ("env", "time"):
        key = ProblemKey(algorithm, 11, 37, dtype, layout, all_flags(algorithm), a)
        check_against_reference(key, seed=3)


@pytest.mark.parametrize("flag_dtype", [torch.bool, torch.int32, torch.uint8, torch.float16,
                                        torch.uint16, torch.uint32, torch.uint64])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_flag_dtypes(algorithm, flag_dtype):
    a = 2 if algorithm == "retrace" else 0
    key = ProblemKey(algorithm, 4, 23, "float32", "env", all_flags(algorithm), a)
    check_against_reference(key, seed=5, flag_dtype=flag_dtype)


@pytest.mark.parametrize("action_dtype", [torch.uint8, torch.int16, torch.uint16, torch.uint32,
                                          torch.uint64])
def test_action_dtypes(action_dtype):
    """Any integer actions (SPEC.md): wide unsigned ones are converted on the way in (the
    kernels take none), the caller's tensor untouched."""
    kwargs = random_inputs(ProblemKey("retrace", 4, 23, "float32", "env", "trunc", 5), seed=5)
    expected = ESTIMATORS["retrace"](**kwargs)
    actions = kwargs["actions"].to(action_dtype)
    kept = actions.clone()
    got = ESTIMATORS["retrace"](**{**kwargs, "actions": actions})
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a, b)
    assert actions.dtype == action_dtype and torch.equal(actions, kept)


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_long_sequence(algorithm):
    a = 2 if algorithm == "retrace" else 0
    layout = "time" if algorithm in ("gae", "eligibility_traces") else "env"
    key = ProblemKey(algorithm, 2, 100_000, "float32", layout, all_flags(algorithm), a)
    check_against_reference(key, seed=7)


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_many_environments_prime_sizes(algorithm):
    a = 7 if algorithm == "retrace" else 0
    key = ProblemKey(algorithm, 1021, 19, "float32", "env", all_flags(algorithm), a)
    check_against_reference(key, seed=11)


def test_mixed_floating_dtypes_output_follows_first_float():
    kwargs = random_inputs(ProblemKey("gae", 5, 9, "bfloat16", "env", "trunc+bootstrap"))
    kwargs["values"] = kwargs["values"].float()
    got = ESTIMATORS["gae"](**kwargs)
    assert got.dtype == torch.bfloat16
    assert relative_error(got, reference("gae", **kwargs)) <= TOLERANCE["bfloat16"]


#: Distinct, non-default values so a swapped or dropped scalar shows.
ODD_SCALARS = {"gamma": 0.8, "lambda_": 0.6, "rho_bar": 1.7, "c_bar": 0.6}


@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_non_default_scalars(algorithm, layout):
    a = 3 if algorithm == "retrace" else 0
    key = ProblemKey(algorithm, 9, 27, "float32", layout, all_flags(algorithm), a)
    kwargs = random_inputs(key, seed=13)
    kwargs.update({name: ODD_SCALARS[name] for name in key.spec.scalars})
    for got, want in zip(as_tuple(ESTIMATORS[algorithm](**kwargs)),
                         as_tuple(reference(algorithm, **kwargs)), strict=True):
        assert relative_error(got, want) <= TOLERANCE["float32"]


@pytest.mark.parametrize("algorithm", ["gae", "vtrace"])
def test_last_value_matches_equivalent_bootstrap_values(algorithm):
    key = ProblemKey(algorithm, 6, 15, "float32", "env", "last_value")
    kwargs = random_inputs(key, seed=17)
    last = kwargs.pop("last_value")
    bootstrap = torch.zeros(6, 15)
    bootstrap[:, -1] = last
    with_last = as_tuple(ESTIMATORS[algorithm](**kwargs, last_value=last))
    with_bootstrap = as_tuple(ESTIMATORS[algorithm](**kwargs, bootstrap_values=bootstrap))
    for x, y in zip(with_last, with_bootstrap, strict=True):
        torch.testing.assert_close(x, y)


def test_float64_inputs_beside_float32_rewards_accumulate_in_float64():
    """SPEC: float64 inputs accumulate in float64, whatever the outputs' dtype (that of
    rewards). Values of 2^24 + 1 and 2^24 differ in float64 and not in float32: the
    advantage at step 0 is -1, which a float32 output holds exactly."""
    rewards = torch.zeros(1, 2)
    values = torch.tensor([[16777217.0, 16777216.0]], dtype=torch.float64)
    out = ESTIMATORS["gae"](rewards, values, torch.zeros(1, 2), gamma=1.0, lambda_=1.0,
                            last_value=torch.tensor([16777216.0], dtype=torch.float64))
    assert out.dtype == torch.float32
    assert out.tolist() == [[-1.0, 0.0]]


def test_only_float64_values_ask_for_float64_accumulation():
    """A float64 flag mask (as numpy makes them) holds 0 and 1: it keeps float32 work;
    float64 values beside float32 rewards switch it to float64."""
    from rltriton_tune.estimators import prepare_call

    x, x64 = torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.float64)
    assert prepare_call("gae", rewards=x, values=x, terminateds=x64,
                        truncateds=x64).compute_dtype == torch.float32
    assert prepare_call("gae", rewards=x, values=x64, terminateds=x).compute_dtype \
        == torch.float64
