"""The usual call's fast path (rltriton_tune.hot_path): taken for the calls it covers,
with the general path's results; every other call, and every error, goes the general way."""

from __future__ import annotations

import itertools
import math

import numpy
import pytest
import torch

from rltriton_tune import dispatch, estimators, force
from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES, FLAG_NAMES
from rltriton_tune.call import ProblemKey, flags_string
from rltriton_tune.estimators import ESTIMATORS
from rltriton_tune.problems import random_inputs

COVERED = list(ESTIMATOR_NAMES)


@pytest.fixture
def builds(monkeypatch):
    """How many calls took the general path (``estimators._build``) so far."""
    count = [0]
    general = estimators._build

    def counted(*args, **kwargs):
        count[0] += 1
        return general(*args, **kwargs)

    monkeypatch.setattr(estimators, "_build", counted)
    return count


PLANS = [plan for plan in vars(estimators).values() if isinstance(plan, estimators._Plan)]


def general_path(function, *args, **kwargs):
    """``function``'s result with the fast path off."""
    saved = [plan.hot for plan in PLANS]
    for plan in PLANS:
        plan.hot = lambda *a: None
    try:
        return function(*args, **kwargs)
    finally:
        for plan, hot in zip(PLANS, saved, strict=True):
            plan.hot = hot


def flag_sets(algorithm):
    """Every set of the estimator's optional inputs (as key flags), none included."""
    optional = [FLAG_NAMES[name] for name in ALGORITHMS[algorithm].optional]
    return [flags_string(frozenset(c)) for size in range(len(optional) + 1)
            for c in itertools.combinations(optional, size)]


def same(a, b):
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert torch.equal(x, y)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("algorithm", COVERED)
def test_every_flag_set_takes_the_fast_path_with_the_general_paths_result(
        algorithm, layout, device, builds):
    """On a GPU the memoised launchers are the Triton kernels' (and their outputs the
    same whichever path reached them)."""
    function = ESTIMATORS[algorithm]
    for flags in flag_sets(algorithm):
        key = ProblemKey(algorithm, 5, 7, layout=layout, flags=flags)
        kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v
                  for k, v in random_inputs(key, seed=3).items()}
        try:
            expected = general_path(function, **kwargs)
        except ValueError:  # a flag set SPEC refuses: the general path says so every time
            before = builds[0]
            with pytest.raises(ValueError):
                function(**kwargs)
            assert builds[0] == before + 1
            continue
        function(**kwargs)  # memoises the decision if the general call above did not
        before = builds[0]
        got = function(**kwargs)
        assert builds[0] == before, f"{algorithm} {flags} {layout} took the general path"
        same(got, expected)
        # The scalars are the call's own, not the memoised call's.
        other = {k: (v * 0.5 if isinstance(v, float) else v) for k, v in kwargs.items()}
        same(function(**other), general_path(function, **other))
        assert builds[0] == before + 1  # only the general_path call above


def test_starts_at_boundaries_have_their_own_pattern(builds):
    kwargs = random_inputs(ProblemKey("episodic_prefix_sum", 6, 9, flags="seed"), seed=1)
    kwargs.pop("boundary", None)
    f = estimators.compute_episodic_prefix_sum
    for boundary in ("ends_at", "starts_at"):
        expected = general_path(f, **kwargs, boundary=boundary)
        f(**kwargs, boundary=boundary)
        before = builds[0]
        same(f(**kwargs, boundary=boundary), expected)
        assert builds[0] == before
    assert not torch.equal(f(**kwargs, boundary="ends_at"), f(**kwargs, boundary="starts_at"))


def _variants(kwargs):
    """Calls the fast path leaves to the general one, by what makes them unusual."""
    r = kwargs["rewards"]
    yield "non-contiguous", {**kwargs, "rewards": r.t().contiguous().t()}
    yield "batch dims", {k: (v.reshape(2, 3, 7) if isinstance(v, torch.Tensor) and v.dim() == 2
                            else v.reshape(2, 3) if isinstance(v, torch.Tensor) else v)
                         for k, v in kwargs.items()}
    yield "integer scalar", {**kwargs, "gamma": 1}
    yield "0-d tensor scalar", {**kwargs, "lambda_": torch.tensor(0.9)}
    yield "subclass", {**kwargs, "values": torch.nn.Parameter(kwargs["values"],
                                                            requires_grad=False)}
    yield "float64", {k: v.double() if isinstance(v, torch.Tensor) else v
                      for k, v in kwargs.items()}
    yield "bool flags", {**kwargs, "terminateds": kwargs["terminateds"].bool()}


@pytest.mark.parametrize("case", [name for name, _ in _variants(
    random_inputs(ProblemKey("gae", 6, 7, flags="last_value"), seed=0))])
def test_unusual_calls_take_the_general_path(case, builds):
    base = random_inputs(ProblemKey("gae", 6, 7, flags="last_value"), seed=0)
    kwargs = dict(_variants(base))[case]
    estimators.compute_gae(**kwargs)
    estimators.compute_gae(**base)
    before = builds[0]
    got = estimators.compute_gae(**kwargs)
    expected = general_path(estimators.compute_gae, **kwargs)
    same(got, expected)
    # bool flags are an accepted dtype: the fast path serves them like float ones
    assert builds[0] == before + (1 if case == "bool flags" else 2)


def test_a_call_autograd_records_takes_the_general_path(builds):
    kwargs = random_inputs(ProblemKey("gae", 6, 7), seed=0)
    estimators.compute_gae(**kwargs)
    values = kwargs["values"].clone().requires_grad_()
    before = builds[0]
    out = estimators.compute_gae(**{**kwargs, "values": values})
    assert out.requires_grad and builds[0] > before
    before = builds[0]
    with torch.no_grad():
        assert not estimators.compute_gae(**{**kwargs, "values": values}).requires_grad
    assert builds[0] == before  # no grad mode: the fast path serves it


@pytest.mark.parametrize("bad, error, words", [
    (lambda: {"gamma": math.nan}, ValueError, "gamma is NaN"),
    (lambda: {"time_major": "yes"}, TypeError, "time_major must be a Python bool"),
    (lambda: {"time_major": 1}, TypeError, "time_major must be a Python bool"),  # hashes like True
    (lambda: {"time_major": numpy.bool_(True)}, TypeError, "got numpy.bool"),
    (lambda: {"values": torch.zeros(6, 8)}, ValueError, "values has shape"),
    (lambda: {"last_value": torch.zeros(7)}, ValueError, "last_value has shape"),
    (lambda: {"rewards": torch.zeros(6, 7, dtype=torch.int32)}, TypeError, "rewards has dtype"),
    (lambda: {"terminateds": None}, TypeError, "terminateds is required"),
    (lambda: {"values": torch.zeros(6, 7, device="meta")}, ValueError, "on one device"),
    (lambda: {"truncateds": torch.zeros(6, 7)}, ValueError, "last_value cannot be combined"),
    (lambda: {"values": torch.zeros(6, 7).to_sparse_csr()}, TypeError, "values must be a dense"),
    (lambda: {"rewards": torch.zeros(6, 7).to_mkldnn()}, TypeError, "rewards must be a dense"),
])
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_errors_are_the_general_paths(bad, error, words):
    kwargs = random_inputs(ProblemKey("gae", 6, 7, flags="last_value"), seed=0)
    estimators.compute_gae(**kwargs)  # memoised: the fast path would serve a good call
    with pytest.raises(error, match=words):
        estimators.compute_gae(**{**kwargs, **bad()})


def test_forced_choices_and_resets_are_followed(builds):
    kwargs = random_inputs(ProblemKey("discounted_returns", 6, 7), seed=0)
    f = estimators.compute_discounted_returns
    with force("torch", mode="loop"):
        expected = general_path(f, **kwargs)
        f(**kwargs)  # another memo key: decided on the general path
        before = builds[0]
        same(f(**kwargs), expected)
        assert builds[0] == before
    expected = general_path(f, **kwargs)
    dispatch.reset()  # forgets every memoised launcher: the next call decides again
    before = builds[0]
    same(f(**kwargs), expected)
    assert builds[0] == before + 1


@pytest.mark.parametrize("bad, error, words", [
    (lambda kw: {"actions": torch.full_like(kw["actions"], 4)}, ValueError,
     r"actions has values in \[4, 4\], outside \[0, 4\)"),
    (lambda kw: {"actions": kw["actions"] - 1}, ValueError, "outside"),
    # unsigned actions of 2**64 - 1: named as such, not as the -1 int64 wraps them to
    (lambda kw: {"actions": torch.full_like(kw["actions"], -1).view(torch.uint64)},
     ValueError, r"actions has values of 2\*\*63 or more, outside \[0, 4\)"),
    (lambda kw: {"next_q_values_all": kw["next_q_values_all"][..., :3].contiguous()},
     ValueError, "next_q_values_all has 3 actions"),
    (lambda kw: {"action_probs_target": kw["action_probs_target"][:5].contiguous()},
     ValueError, "action_probs_target has shape"),
    (lambda kw: {"action_probs_target": kw["action_probs_target"][..., :0],
                 "next_q_values_all": kw["next_q_values_all"][..., :0]},
     ValueError, "have no actions"),
    (lambda kw: {"actions": kw["actions"].float()}, TypeError, "actions has dtype"),
])
def test_retraces_errors_are_the_general_paths(bad, error, words):
    """Retrace's fast path checks A across its [N, T, A] inputs and, on a CPU, the range
    of the actions; a call failing either gets the general path's error."""
    kwargs = random_inputs(ProblemKey("retrace", 6, 7, flags="trunc", a=4), seed=0)
    estimators.compute_retrace(**kwargs)  # memoised: the fast path would serve a good call
    with pytest.raises(error, match=words):
        estimators.compute_retrace(**{**kwargs, **bad(kwargs)})


def test_retrace_with_another_action_count_is_another_key(builds):
    """A is part of the memo key: a call with more actions is decided on its own."""
    f = estimators.compute_retrace
    four = random_inputs(ProblemKey("retrace", 6, 7, flags="trunc", a=4), seed=0)
    five = random_inputs(ProblemKey("retrace", 6, 7, flags="trunc", a=5), seed=0)
    f(**four)
    before = builds[0]
    same(f(**five), general_path(f, **five))
    assert builds[0] == before + 2  # decided, then the general_path call
    f(**five)
    assert builds[0] == before + 2


def test_a_reset_while_binding_stores_no_bound_launch():
    """A bound launch is stored only while its launcher is still the key's: a reset that
    comes between reading the launcher and storing must leave the fresh state clean."""
    from rltriton_tune import hot_path
    from rltriton_tune.state import STATE

    key = ("gae", 2, 3, torch.float32, False, 0, False, "rewards", torch.device("cpu"), None)

    def launcher(call):
        raise AssertionError("not called")

    def bind(*args, **kwargs):
        dispatch.reset()
        return lambda *inputs: None

    launcher.bind = bind
    STATE.table[key] = launcher
    assert hot_path._bind(key, ("rewards",), ("gamma",), "rewards", True) is None
    assert key not in STATE.bound
    # without a reset, the launcher's bound launch is stored (False where it has none)
    STATE.table[key] = launcher
    launcher.bind = lambda *args, **kwargs: None
    assert hot_path._bind(key, ("rewards",), ("gamma",), "rewards", True) is False
    assert STATE.bound[key] is False


def _other_layouts(device, shape):
    """Every tensor layout but strided that a float input of ``shape`` can have on
    ``device`` (the compressed sparse ones and the nested one need two dims)."""
    dense = torch.zeros(shape, device=device)
    layouts = {"sparse_coo": dense.to_sparse()}
    if len(shape) == 2:
        layouts.update(sparse_csr=dense.to_sparse_csr(), sparse_csc=dense.to_sparse_csc(),
                       sparse_bsr=dense.to_sparse_bsr((1, 1)),
                       sparse_bsc=dense.to_sparse_bsc((1, 1)))
    layouts["nested"] = torch.nested.nested_tensor([torch.zeros(shape[-1], device=device)]
                                                   * shape[0])
    if device == "cpu":
        layouts["mkldnn"] = dense.to_mkldnn()
    return layouts


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("name", ["rewards", "values", "last_value"])
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype")
def test_other_layouts_take_the_general_path_on_every_device(device, name, builds):
    """The fast path reads layouts on a CPU only: on other devices each non-strided layout
    must fail its other checks, so that the general path names the argument."""
    kwargs = random_inputs(ProblemKey("gae", 6, 7, flags="last_value"), seed=0)
    kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    estimators.compute_gae(**kwargs)  # memoised: the fast path would serve a good call
    for layout, tensor in _other_layouts(device, kwargs[name].shape).items():
        before = builds[0]
        with pytest.raises((TypeError, ValueError), match=name):
            estimators.compute_gae(**{**kwargs, name: tensor})
        assert builds[0] == before + 1, f"{layout} {name} on {device} took the fast path"


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["gae", "vtrace"])
def test_tensors_on_another_gpu_than_the_current_take_the_general_path_there(algorithm,
                                                                            builds):
    """Kernels launch on the current device: a call on a second GPU declines the fast path
    and runs under that GPU's guard, with the same results as on the current one."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    kwargs = random_inputs(ProblemKey(algorithm, 6, 9, flags="last_value"), seed=1)
    on = {d: {k: v.to(d) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
          for d in ("cuda:0", "cuda:1")}
    with torch.cuda.device(0):
        expected = ESTIMATORS[algorithm](**on["cuda:0"])
        for _ in range(2):  # the second call is memoised: the fast path must decline it
            before = builds[0]
            got = ESTIMATORS[algorithm](**on["cuda:1"])
            assert builds[0] == before + 1
            torch.cuda.synchronize(1)
            for x, y in zip(torch.utils._pytree.tree_leaves(got),
                            torch.utils._pytree.tree_leaves(expected), strict=True):
                assert x.device == torch.device("cuda", 1)
                torch.testing.assert_close(x.cpu(), y.cpu())
