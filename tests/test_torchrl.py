"""rltriton_tune.torchrl against TorchRL itself (a test dependency; skipped without it)."""

from __future__ import annotations

import pytest
import torch

from rltriton_tune import torchrl as ours

torchrl = pytest.importorskip("torchrl")
functional = pytest.importorskip("torchrl.objectives.value.functional")

GAMMA, LMBDA = 0.97, 0.9

#: (shape, time_dim): TorchRL's [*B, T, 1], time-first, no feature dim, several batch
#: dims, two features, one sequence.
LAYOUTS = [((3, 12, 1), -2), ((12, 3, 1), 0), ((3, 12), -1), ((2, 3, 12, 1), -2),
           ((3, 12, 2), 1), ((12,), -1)]


def data(shape, time_dim, seed=0):
    gen = torch.Generator().manual_seed(seed)
    value, next_value, reward = torch.randn(3, *shape, generator=gen).unbind(0)
    done = torch.rand(shape, generator=gen) < 0.2
    # Always some termination and some truncation (done, not terminated).
    terminated = done & (torch.rand(shape, generator=gen) < 0.5)
    log_pi, log_mu = (0.3 * torch.randn(2, *shape, generator=gen)).unbind(0)
    return dict(state_value=value, next_state_value=next_value, reward=reward, done=done,
                terminated=terminated, log_pi=log_pi, log_mu=log_mu)


def close(got, want):
    torch.testing.assert_close(got, want, rtol=1e-5, atol=2e-6)


GAE_NAMES = ["generalized_advantage_estimate", "vec_generalized_advantage_estimate"]
TD_NAMES = ["td_lambda_return_estimate", "vec_td_lambda_return_estimate"]


@pytest.mark.parametrize("with_terminated", [False, True])
@pytest.mark.parametrize(("shape", "time_dim"), LAYOUTS)
@pytest.mark.parametrize("name", GAE_NAMES)
def test_gae_matches_torchrl(name, shape, time_dim, with_terminated):
    d = data(shape, time_dim)
    args = (GAMMA, LMBDA, d["state_value"], d["next_state_value"], d["reward"], d["done"],
            d["terminated"] if with_terminated else None)
    want = getattr(functional, name)(*args, time_dim=time_dim)
    got = getattr(ours, name)(*args, time_dim=time_dim)
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        close(g, w)


@pytest.mark.parametrize("with_terminated", [False, True])
@pytest.mark.parametrize(("shape", "time_dim"), LAYOUTS)
@pytest.mark.parametrize("name", TD_NAMES)
def test_td_lambda_matches_torchrl(name, shape, time_dim, with_terminated):
    d = data(shape, time_dim, seed=1)
    args = (GAMMA, LMBDA, d["next_state_value"], d["reward"], d["done"],
            d["terminated"] if with_terminated else None)
    want = getattr(functional, name)(*args, time_dim=time_dim)
    got = getattr(ours, name)(*args, time_dim=time_dim)
    assert got.shape == want.shape
    close(got, want)


@pytest.mark.parametrize("with_terminated", [False, True])
@pytest.mark.parametrize(("shape", "time_dim"), LAYOUTS)
def test_vtrace_matches_torchrl(shape, time_dim, with_terminated):
    d = data(shape, time_dim, seed=2)
    args = (GAMMA, d["log_pi"], d["log_mu"], d["state_value"], d["next_state_value"],
            d["reward"], d["done"], d["terminated"] if with_terminated else None)
    want = functional.vtrace_advantage_estimate(*args, rho_thresh=1.1, c_thresh=0.8,
                                                time_dim=time_dim)
    got = ours.vtrace_advantage_estimate(*args, rho_thresh=1.1, c_thresh=0.8,
                                         time_dim=time_dim)
    for g, w in zip(got, want, strict=True):   # (advantages, vs)
        close(g, w)


def test_signatures_match_torchrl():
    import inspect

    for name in ours.__all__:
        if name == "patch_torchrl":
            continue
        theirs = inspect.signature(getattr(functional, name))
        mine = inspect.signature(getattr(ours, name))
        assert [(p.name, p.kind, p.default) for p in mine.parameters.values()] == \
            [(p.name, p.kind, p.default) for p in theirs.parameters.values()], name


def test_zero_dim_tensor_scalars_and_errors():
    d = data((3, 12, 1), -2)
    args = (d["state_value"], d["next_state_value"], d["reward"], d["done"])
    want = functional.generalized_advantage_estimate(GAMMA, LMBDA, *args)
    got = ours.generalized_advantage_estimate(torch.tensor(GAMMA), torch.tensor(LMBDA), *args)
    close(got[0], want[0])
    with pytest.raises(ValueError, match="gamma"):
        ours.generalized_advantage_estimate(torch.full((3, 12, 1), GAMMA), LMBDA, *args)
    with pytest.raises(ValueError, match="share one shape"):
        ours.generalized_advantage_estimate(GAMMA, LMBDA, d["state_value"][:, :-1], *args[1:])
    with pytest.raises(ValueError, match="time_dim"):
        ours.generalized_advantage_estimate(GAMMA, LMBDA, *args, time_dim=3)
    with pytest.raises(ValueError, match="rolling_gamma"):
        ours.td_lambda_return_estimate(GAMMA, LMBDA, d["next_state_value"], d["reward"],
                                       d["done"], rolling_gamma=False)


@pytest.mark.parametrize("vectorized", [True, False])
def test_patch_torchrl_gae_module(vectorized):
    from tensordict import TensorDict
    from torchrl.objectives.value import GAE

    d = data((4, 10, 1), -2, seed=3)
    td = TensorDict({
        "state_value": d["state_value"],
        "next": {"state_value": d["next_state_value"], "reward": d["reward"],
                 "done": d["done"], "terminated": d["terminated"]},
    }, batch_size=[4, 10])
    module = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=None, vectorized=vectorized)
    want = module(td.clone())
    calls = []
    original = ours._REPLACED["vec_generalized_advantage_estimate" if vectorized
                              else "generalized_advantage_estimate"]

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    key = "vec_generalized_advantage_estimate" if vectorized else \
        "generalized_advantage_estimate"
    ours._REPLACED[key] = spy
    try:
        with ours.patch_torchrl():
            got = module(td.clone())
    finally:
        ours._REPLACED[key] = original
    assert calls, "the module did not call rltriton_tune.torchrl"
    for name in ("advantage", "value_target"):
        close(got[name], want[name])
    # Restored on exit.
    advantages = importlib_advantages()
    assert advantages.vec_generalized_advantage_estimate is \
        functional.vec_generalized_advantage_estimate


def importlib_advantages():
    import importlib

    return importlib.import_module("torchrl.objectives.value.advantages")


def test_patch_leaves_per_step_gammas_to_torchrl():
    d = data((3, 8, 1), -2, seed=4)
    gammas = torch.full((3, 8, 1), GAMMA)
    with ours.patch_torchrl():
        patched = importlib_advantages().vec_generalized_advantage_estimate
        got = patched(gammas, LMBDA, d["state_value"], d["next_state_value"], d["reward"],
                      d["done"], d["terminated"])
    want = functional.vec_generalized_advantage_estimate(
        gammas, LMBDA, d["state_value"], d["next_state_value"], d["reward"], d["done"],
        d["terminated"])
    for g, w in zip(got, want, strict=True):
        close(g, w)


def _arguments(name, d):
    """Keyword arguments of ``name`` (a module-level function of ours) from ``data``."""
    import inspect

    scalars = {"gamma": GAMMA, "lmbda": LMBDA, "rho_thresh": 1.0, "c_thresh": 1.0}
    params = inspect.signature(getattr(ours, name)).parameters
    return {p: scalars[p] if p in scalars else d[p] for p in params
            if p in scalars or p in d}


FUNCTIONS = [*GAE_NAMES, *TD_NAMES, "vtrace_advantage_estimate"]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_errors_name_our_arguments(name):
    """Bad tensors and scalars are TypeError / ValueError naming this function's argument
    (``done``, not the estimator's ``truncateds``), never a torch error from the flag
    arithmetic before the estimator, nor a complex ``done`` silently taken."""
    base = _arguments(name, data((3, 12, 1), -2))
    tensors = [k for k, v in base.items() if isinstance(v, torch.Tensor)]
    for arg in tensors:
        x = base[arg]
        bads = [(x.to(torch.complex64), TypeError), (x.to("meta"), ValueError),
                (x.to_sparse(), TypeError)]
        if arg != "terminated":  # the one that may be None
            bads.append((None, TypeError))
        for bad, error in bads:
            # Whole words ("reward" would also match an estimator's "rewards"), and no
            # estimator's name: the wrapper raised it.
            with pytest.raises(error, match=rf"^(?!compute_).*\b{arg}\b"):
                getattr(ours, name)(**{**base, arg: bad})
        if x.is_floating_point():
            with pytest.raises(TypeError, match=rf"^{arg}\b"):
                getattr(ours, name)(**{**base, arg: x.to(torch.int64)})
    for arg in [k for k in base if k not in tensors]:
        for bad, error in [(float("nan"), ValueError), (torch.tensor(float("nan")), ValueError),
                           (True, TypeError), ("0.9", TypeError), (None, TypeError),
                           (torch.tensor(GAMMA, device="meta"), ValueError),
                           (10**400, ValueError)]:
            with pytest.raises(error, match=rf"^{arg}\b"):
                getattr(ours, name)(**{**base, arg: bad})


def test_compile_fullgraph_with_a_cpu_tensor_scalar():
    """A 0-d CPU tensor gamma (a TorchRL module's buffer on a CPU run) is passed on
    unread, so a compiled function calling the wrapper traces as one graph."""
    torch._dynamo.reset()
    base = _arguments("generalized_advantage_estimate", data((3, 12, 1), -2))
    base["gamma"] = torch.tensor(GAMMA)
    compiled = torch.compile(lambda kw: ours.generalized_advantage_estimate(**kw),
                             fullgraph=True, backend="aot_eager")
    for got, want in zip(compiled(base), ours.generalized_advantage_estimate(**base),
                         strict=True):
        close(got, want)


def test_compile_fullgraph_with_a_numpy_scalar():
    """A numpy scalar gamma (dynamo traces it as a 0-d array) compiles as one graph and
    gives the eager outputs."""
    import numpy as np

    torch._dynamo.reset()
    base = _arguments("generalized_advantage_estimate", data((3, 12, 1), -2))
    compiled = torch.compile(lambda kw, g: ours.generalized_advantage_estimate(**kw, gamma=g),
                             fullgraph=True, backend="aot_eager")
    eager = ours.generalized_advantage_estimate(**{**base, "gamma": np.float64(GAMMA)})
    for got, want in zip(compiled({k: v for k, v in base.items() if k != "gamma"},
                                  np.float64(GAMMA)), eager, strict=True):
        close(got, want)
