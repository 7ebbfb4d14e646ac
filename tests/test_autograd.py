"""Gradients of the estimators (rltriton_tune.autograd): gradcheck in float64 for every
estimator and flag set, the adjoint scans against autograd through a loop, Triton
strategies under the interpreter, and inputs that get no gradient."""

from __future__ import annotations

import itertools

import pytest
import torch

import rltriton_tune as rt
from rltriton_tune import dispatch
from rltriton_tune.algorithms import (
    ADJOINT_SCANS,
    ALGORITHMS,
    ESTIMATOR_NAMES,
    GRAD_ALGORITHMS,
    STARTS_AT,
)
from rltriton_tune.autograd import adjoint_scan, differentiable
from rltriton_tune.call import Call, ProblemKey, flags_string
from rltriton_tune.dispatch import memo
from rltriton_tune.estimators import ESTIMATORS
from rltriton_tune.problems import random_inputs

N, T = 3, 5


def flag_sets(algorithm: str) -> list[frozenset[str]]:
    """Every flag set a call of ``algorithm`` can have (last_value and next_values exclude
    the bootstrap options they replace)."""
    spec = ALGORITHMS[algorithm]
    optional = sorted(spec.possible_flags - spec.required_flags)
    found = []
    for k in range(len(optional) + 1):
        for extra in itertools.combinations(optional, k):
            flags = spec.required_flags | set(extra)
            if "last_value" in flags and ("bootstrap" in flags or "trunc" in flags):
                continue
            if "next" in flags and ("bootstrap" in flags or "last_value" in flags):
                continue
            found.append(frozenset(flags))
    return found


CASES = [(a, flags_string(f)) for a in ESTIMATOR_NAMES for f in flag_sets(a)]


def inputs(algorithm: str, flags: str, time_major: bool = False, dtype: str = "float64",
           seed: int = 0, n: int = N, t: int = T) -> dict:
    key = ProblemKey(algorithm, n, t, dtype, "time" if time_major else "env", flags,
                     a=4 if algorithm == "retrace" else 0)
    kwargs = random_inputs(key, seed=seed)
    # Flags present at some steps of every row, so gradients cross episode ends.
    for name in ALGORITHMS[algorithm].flags_inputs:
        if name in kwargs:
            step = kwargs[name]
            step.zero_()
            (step[1] if time_major else step[:, 1]).fill_(1)
    if algorithm == "vtrace":
        kwargs["rho_bar"], kwargs["c_bar"] = 1.3, 0.9   # some ratios on each side of a clip
    if algorithm == "retrace":
        kwargs["rho_bar"], kwargs["c_bar"] = 1.5, 1.1
    return kwargs


def grad_names(algorithm: str, kwargs: dict) -> list[str]:
    return [name for name in differentiable(algorithm) if kwargs.get(name) is not None]


def as_function(algorithm: str, kwargs: dict, names: list[str]):
    function = ESTIMATORS[algorithm]

    def f(*tensors):
        return function(**{**kwargs, **dict(zip(names, tensors, strict=True))})

    return f


def check(algorithm: str, kwargs: dict) -> None:
    names = grad_names(algorithm, kwargs)
    assert names, algorithm
    leaves = tuple(kwargs[name].detach().clone().requires_grad_() for name in names)
    assert torch.autograd.gradcheck(as_function(algorithm, kwargs, names), leaves,
                                    eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(("algorithm", "flags"), CASES)
def test_gradcheck_every_flag_set(algorithm, flags):
    check(algorithm, inputs(algorithm, flags))


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_gradcheck_time_major(algorithm):
    check(algorithm, inputs(algorithm, flags_string(flag_sets(algorithm)[-1]), time_major=True))


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
@pytest.mark.parametrize("mode", ["loop", "chunked", "doubling"])
def test_backward_runs_for_every_fallback_mode(algorithm, mode):
    """The in-place fallback scans once made backward() fail (doubling, N < 2048) or not
    (loop, N >= 2048): every mode now gives the same gradients."""
    kwargs = inputs(algorithm, flags_string(flag_sets(algorithm)[-1]), t=11)
    names = grad_names(algorithm, kwargs)
    grads = {}
    for forced in (None, mode):
        leaves = [kwargs[name].detach().clone().requires_grad_() for name in names]
        if forced is None:
            outputs = as_function(algorithm, kwargs, names)(*leaves)
        else:
            with rt.force("torch", mode=forced, **({"chunk": 2} if forced == "chunked" else {})):
                outputs = as_function(algorithm, kwargs, names)(*leaves)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        sum(o.pow(2).sum() for o in outputs).backward()
        grads[forced] = [leaf.grad for leaf in leaves]
    for a, b in zip(grads[None], grads[mode], strict=True):
        torch.testing.assert_close(a, b)


def test_backward_at_the_size_that_used_to_fail():
    """issue 33: N < 2048 took the doubling mode and backward() raised."""
    g = torch.Generator().manual_seed(1)
    r = torch.randn(64, 32, generator=g, requires_grad=True)
    v = torch.randn(64, 32, generator=g, requires_grad=True)
    term = (torch.rand(64, 32, generator=g) < 0.1).float()
    rt.compute_gae(r, v, term).sum().backward()
    assert r.grad is not None and v.grad is not None
    assert torch.isfinite(r.grad).all() and torch.isfinite(v.grad).all()


# ------------------------------------------------------------------ adjoint scans


def naive_scan(alpha, beta, reverse):
    """y[t] = alpha[t] + beta[t] y[t+-1] as a differentiable Python loop (no in-place)."""
    steps = range(alpha.shape[1] - 1, -1, -1) if reverse else range(alpha.shape[1])
    ys, prev = {}, None
    for t in steps:
        prev = alpha[:, t] if prev is None else alpha[:, t] + beta[:, t] * prev
        ys[t] = prev
    return torch.stack([ys[t] for t in range(alpha.shape[1])], dim=1)


@pytest.mark.parametrize("reverse", [True, False])
@pytest.mark.parametrize("time_major", [False, True])
def test_adjoint_scan_is_the_gradient_of_the_scan(reverse, time_major):
    g = torch.Generator().manual_seed(2)
    alpha = torch.randn(4, 9, dtype=torch.float64, generator=g, requires_grad=True)
    beta = torch.rand(4, 9, dtype=torch.float64, generator=g)
    grad_y = torch.randn(4, 9, dtype=torch.float64, generator=g)
    naive_scan(alpha, beta, reverse).backward(grad_y)
    call = Call("gae", {}, {}, 4, 9, time_major=time_major, out_dtype=torch.float64)
    z = adjoint_scan(grad_y, beta, reverse, call)
    torch.testing.assert_close(z, alpha.grad)


@pytest.mark.parametrize("strategy", ["flat", "tiled", "sequential", "split", "lookback"])
@pytest.mark.parametrize("algorithm", ["adjoint_scan_forward", "adjoint_scan_backward"])
def test_adjoint_scans_in_triton_match_the_reference(strategy, algorithm):
    from rltriton_tune.reference import reference

    for time_major in (False, True):
        kwargs = random_inputs(ProblemKey(algorithm, 3, 37, layout="time" if time_major
                                          else "env"), seed=3)
        call = Call(algorithm, {"grads": kwargs["grads"], "beta": kwargs["beta"]}, {}, 3, 37,
                    time_major, out_dtype=torch.float32)
        with rt.force(strategy):
            out = dispatch.run(call)[0]
        expected = reference(algorithm, **kwargs)
        torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("strategy", ["tiled", "flat"])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_gradients_with_triton_strategies_match_the_fallback(strategy, algorithm):
    """Forward and backward scans (the grad algorithm, or the adjoint scan) both forced to a
    Triton strategy (interpreter on CPU): the backward pass dispatches under the same
    ``force``."""
    kwargs = inputs(algorithm, flags_string(flag_sets(algorithm)[-1]), dtype="float32")
    names = grad_names(algorithm, kwargs)
    grads = {}
    for forced in (None, strategy):
        leaves = [kwargs[name].detach().clone().requires_grad_() for name in names]
        f = as_function(algorithm, kwargs, names)
        with rt.force(forced or "torch"):
            outputs = f(*leaves)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            weights = [torch.linspace(-1, 1, o.numel()).reshape(o.shape) for o in outputs]
            sum((o * w).sum() for o, w in zip(outputs, weights, strict=True)).backward()
        grads[forced] = [leaf.grad for leaf in leaves]
    backward = GRAD_ALGORITHMS.get(algorithm, ADJOINT_SCANS[ALGORITHMS[algorithm].direction])
    assert {d.strategy for k, d in memo.decisions().items() if k[0].algorithm == backward} \
        == {strategy}
    for a, b in zip(grads[None], grads[strategy], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------ no-gradient inputs


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_flags_get_no_gradient(algorithm):
    kwargs = inputs(algorithm, flags_string(flag_sets(algorithm)[-1]), dtype="float32")
    flag = ALGORITHMS[algorithm].flags_inputs[0]
    kwargs[flag] = kwargs[flag].float().requires_grad_()
    outputs = ESTIMATORS[algorithm](**kwargs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert outputs[0].requires_grad
    sum(o.sum() for o in outputs).backward()     # no crash: the flag's gradient is None
    assert kwargs[flag].grad is None


def test_integer_actions_cannot_require_grad_and_others_still_do():
    kwargs = inputs("retrace", "trunc", dtype="float32")
    with pytest.raises(RuntimeError, match="floating point"):
        kwargs["actions"].requires_grad_()
    q = kwargs["q_values"].requires_grad_()
    q_ret, adv = rt.compute_retrace(**kwargs)
    (q_ret.sum() + adv.sum()).backward()
    assert q.grad is not None and q.grad.shape == q.shape


def test_no_grad_calls_take_the_direct_path(monkeypatch):
    from rltriton_tune import ops

    def refuse(*args, **kwargs):
        raise AssertionError("custom operator used without grad")

    monkeypatch.setattr(ops, "estimate", refuse)
    kwargs = inputs("gae", "none", dtype="float32")
    out = rt.compute_gae(**kwargs)                       # nothing requires grad
    assert out.grad_fn is None
    kwargs["rewards"].requires_grad_()
    with torch.no_grad():
        assert rt.compute_gae(**kwargs).grad_fn is None  # grad mode off


def test_outputs_do_not_alias_inputs():
    kwargs = inputs("discounted_returns", "none", dtype="float32")
    kwargs["rewards"].requires_grad_()
    out = rt.compute_discounted_returns(**kwargs)
    assert out.untyped_storage().data_ptr() != kwargs["rewards"].untyped_storage().data_ptr()


def test_empty_problem_backward():
    r = torch.zeros(0, 4, requires_grad=True)
    out = rt.compute_discounted_returns(r, torch.zeros(0, 4))
    out.sum().backward()
    assert r.grad is not None and r.grad.shape == r.shape


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_gradients_have_the_input_dtype(dtype):
    kwargs = inputs("vtrace", "trunc+bootstrap", dtype="float32")
    for name in ("log_pi_target", "log_pi_behavior", "values", "rewards", "bootstrap_values"):
        kwargs[name] = kwargs[name].to(dtype)
    v = kwargs["values"].requires_grad_()
    vs, adv = rt.compute_vtrace(**kwargs)
    (vs.float().sum() + adv.float().sum()).backward()
    assert v.grad.dtype == dtype


def test_starts_at_is_a_flag_of_the_prefix_sum_cases():
    assert any(STARTS_AT in flags for a, flags in CASES if a == "episodic_prefix_sum")


def test_fused_phases_give_the_eager_gradients(monkeypatch):
    """The torch.compile'd pointwise phases (the default on CUDA) equal the eager ones."""
    import warnings

    from rltriton_tune import autograd

    kwargs = inputs("vtrace", "bootstrap+trunc", t=7)
    names = grad_names("vtrace", kwargs)
    grads = {}
    for fuse in (False, True):
        monkeypatch.setattr(autograd, "FUSE", fuse)
        leaves = [kwargs[name].detach().clone().requires_grad_() for name in names]
        vs, adv = as_function("vtrace", kwargs, names)(*leaves)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # a phase run eagerly warns
            (vs.square().sum() + adv.sum()).backward()
        grads[fuse] = [leaf.grad for leaf in leaves]
    for a, b in zip(grads[False], grads[True], strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(64, 96), (5, 3000), (2000, 17)])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_cuda_gradients_match_the_cpu_fallback(algorithm, shape, dtype):
    """Default dispatch on CUDA (Triton forward and adjoint scans, fused phases) against
    the float64 CPU fallback."""
    n, t = shape
    flags = flags_string(flag_sets(algorithm)[-1])
    kwargs = inputs(algorithm, flags, dtype=dtype, n=n, t=t)
    names = grad_names(algorithm, kwargs)
    grads = {}
    for device in ("cuda", "cpu"):
        moved = {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in kwargs.items()}
        if device == "cpu":
            moved = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v)
                     for k, v in moved.items()}
        leaves = [moved[name].detach().clone().requires_grad_() for name in names]
        outputs = as_function(algorithm, moved, names)(*leaves)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        g = torch.Generator().manual_seed(7)
        weights = [torch.randn(o.shape, generator=g, dtype=torch.float64).to(o.device, o.dtype)
                   for o in outputs]
        sum((o * w).float().sum() for o, w in zip(outputs, weights, strict=True)).backward()
        grads[device] = [leaf.grad.double().cpu() for leaf in leaves]
    tolerance = 3e-2 if dtype == "bfloat16" else 1e-4
    for name, a, b in zip(names, grads["cuda"], grads["cpu"], strict=True):
        error = ((a - b).norm() / b.norm().clamp_min(1e-30)).item()
        assert error <= tolerance, f"{algorithm} {shape} {dtype} d/d{name}: {error:.3g}"


def test_second_order_gradients_are_a_clear_error():
    kwargs = inputs("vtrace", "trunc", dtype="float32")
    v = kwargs["values"].requires_grad_()
    _, adv = rt.compute_vtrace(**kwargs)
    (g,) = torch.autograd.grad(adv.sum(), v, create_graph=True)
    with pytest.raises(RuntimeError, match="rltriton_tune.vtrace_backward"):
        g.sum().backward()


def test_one_output_of_two_used():
    kwargs = inputs("vtrace", "trunc", dtype="float32")
    v = kwargs["values"].requires_grad_()
    vs, _ = rt.compute_vtrace(**kwargs)
    vs.sum().backward()
    assert v.grad is not None and torch.isfinite(v.grad).all()


@pytest.mark.parametrize("time_major", [False, True])
def test_gradcheck_batch_dims(time_major):
    """[*B, T] inputs ([T, *B] time-major): gradients come back in the caller's shape."""
    g = torch.Generator().manual_seed(4)
    shape = (T, 2, 3) if time_major else (2, 3, T)
    r = torch.randn(shape, dtype=torch.float64, generator=g, requires_grad=True)
    v = torch.randn(shape, dtype=torch.float64, generator=g, requires_grad=True)
    term = (torch.rand(shape, generator=g) < 0.3).double()
    last = torch.randn(2, 3, dtype=torch.float64, generator=g, requires_grad=True)

    def f(r, v, last):
        return rt.compute_gae(r, v, term, gamma=0.9, lambda_=0.8, last_value=last,
                              time_major=time_major)

    assert torch.autograd.gradcheck(f, (r, v, last))


def test_zero_dim_tensor_scalars_with_grad():
    kwargs = inputs("gae", "trunc", dtype="float32")
    grads = []
    for gamma in (0.9, torch.tensor(0.9)):
        r = kwargs["rewards"].detach().clone().requires_grad_()
        rt.compute_gae(**{**kwargs, "rewards": r, "gamma": gamma}).sum().backward()
        grads.append(r.grad)
    torch.testing.assert_close(grads[0], grads[1])


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_outputs_edited_in_place_before_backward(algorithm):
    """PPO normalises advantages in place (``adv.sub_(adv.mean())``). Where the backward
    pass needs only the inputs, the outputs are not kept for it, so the edit is fine and
    gives the out-of-place gradients; V-trace's and Retrace's backward read their
    outputs, and autograd names the in-place edit."""
    from rltriton_tune.autograd import reads_outputs

    kwargs = inputs(algorithm, flags_string(flag_sets(algorithm)[-1]))
    names = grad_names(algorithm, kwargs)
    grads = {}
    for in_place in (False, True):
        leaves = [kwargs[name].detach().clone().requires_grad_() for name in names]
        result = as_function(algorithm, kwargs, names)(*leaves)
        out = result[-1] if isinstance(result, tuple) else result
        if in_place:
            if reads_outputs(algorithm):
                out.sub_(out.mean().detach())
                with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                    out.square().sum().backward()
                return
            out.sub_(out.mean().detach())
        else:
            out = out - out.mean().detach()
        out.square().sum().backward()
        grads[in_place] = [leaf.grad for leaf in leaves]
    for a, b in zip(grads[False], grads[True], strict=True):
        torch.testing.assert_close(a, b)
