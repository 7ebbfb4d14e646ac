"""Fused backward passes (rltriton_tune.fused_grad): one grad-algorithm call gives the
gradients of the three-phase path and of autograd through the float64 reference, for
every flag set of the six estimators with a grad algorithm, in both layouts."""

from __future__ import annotations

import itertools

import pytest
import torch

import rltriton_tune as rt
from rltriton_tune import dispatch
from rltriton_tune.algorithms import ALGORITHMS, GRAD_ALGORITHMS
from rltriton_tune.autograd import differentiable, gradients, phased_gradients
from rltriton_tune.call import ProblemKey, flags_string
from rltriton_tune.dispatch import memo
from rltriton_tune.estimators import ESTIMATORS, prepare_call
from rltriton_tune.fused_grad import grad_call
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference_vjp


def flag_sets(algorithm: str) -> list[str]:
    """Every flag set a call of ``algorithm`` can have (last_value and next_values exclude
    the bootstrap options they replace)."""
    optional = sorted(ALGORITHMS[algorithm].possible_flags)
    found = []
    for k in range(len(optional) + 1):
        for flags in map(set, itertools.combinations(optional, k)):
            if "last_value" in flags and flags & {"bootstrap", "trunc"}:
                continue
            if "next" in flags and flags & {"bootstrap", "last_value"}:
                continue
            found.append(flags_string(flags))
    return found


CASES = [(a, f) for a in GRAD_ALGORITHMS for f in flag_sets(a)]


def case(algorithm: str, flags: str, layout: str, dtype: str = "float64", n: int = 3,
         t: int = 9, seed: int = 0):
    """(kwargs, call, outputs, output gradients (one per output), names of the inputs with
    a gradient): every flag of the key in every row, some on the first and last steps."""
    key = ProblemKey(algorithm, n, t, dtype, layout, flags)
    kwargs = random_inputs(key, seed=seed, every_flag=True)
    call = prepare_call(algorithm, **kwargs)
    outputs = dispatch.run(call)
    gen = torch.Generator().manual_seed(seed + 1)
    grads = tuple(torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype)
                  for o in outputs)
    names = tuple(name for name in differentiable(algorithm) if name in call.tensors)
    return kwargs, call, outputs, grads, names


@pytest.mark.parametrize(("algorithm", "flags"), CASES)
def test_fused_equals_the_phases_and_the_reference(algorithm, flags):
    for layout in ("env", "time"):
        kwargs, call, outputs, grads, names = case(algorithm, flags, layout)
        fused = gradients(call, outputs, grads, names)
        phased = phased_gradients(call, outputs, grads, names)
        want = reference_vjp(algorithm, grads, names, **kwargs)
        assert set(fused) == set(names)
        for name in names:
            shape = call.tensors[name].shape
            what = f"{layout} d/d{name}"
            torch.testing.assert_close(fused[name].reshape(shape), want[name], msg=what)
            torch.testing.assert_close(phased[name].reshape(shape), want[name], msg=what)


@pytest.mark.parametrize("algorithm", sorted(GRAD_ALGORITHMS))
def test_only_the_needed_gradients(algorithm):
    """Each input alone: its gradient, and nothing else."""
    kwargs, call, outputs, grads, names = case(algorithm, flag_sets(algorithm)[-1], "env")
    want = reference_vjp(algorithm, grads, names, **kwargs)
    for name in names:
        found = gradients(call, outputs, grads, (name,))
        assert list(found) == [name]
        torch.testing.assert_close(found[name].reshape(want[name].shape), want[name])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_written_gradients_have_the_output_dtype(dtype):
    _, call, outputs, grads, _ = case("gae", "trunc", "time", dtype)
    found = gradients(call, outputs, grads, ("rewards", "values"))
    assert {g.dtype for g in found.values()} == {call.out_dtype}
    assert found["values"].shape == call.tensors["values"].shape


@pytest.mark.parametrize(("algorithm", "flags", "grad_flags"), [
    ("gae", "bootstrap+trunc", "trunc"),
    ("gae", "last_value", "none"),
    ("gae", "next+trunc", "next+trunc"),
    ("lambda_returns", "bootstrap+trunc", "trunc"),
    ("discounted_returns", "bootstrap", "none"),
    ("eligibility_traces", "seed", "none"),
    ("episodic_prefix_sum", "seed+starts_at", "starts_at"),
])
def test_grad_call_keeps_the_flags_its_kernel_reads(algorithm, flags, grad_flags):
    _, call, outputs, (grad, *_), _ = case(algorithm, flags, "time", "float32")
    key = grad_call(call, grad).key
    assert key == ProblemKey(GRAD_ALGORITHMS[algorithm], call.n, call.t, "float32", "time",
                             grad_flags)


@pytest.mark.parametrize(("algorithm", "flags", "needed", "grad_flags"), [
    ("gae", "bootstrap+trunc", ("values", "bootstrap_values"), "bootstrap+trunc"),
    ("gae", "last_value", ("last_value",), "last_value"),
    ("gae", "next+trunc", ("next_values",), "next+trunc"),
    ("lambda_returns", "bootstrap", ("rewards", "bootstrap_values"), "bootstrap"),
    ("eligibility_traces", "seed", ("seed_values",), "seed"),
    ("episodic_prefix_sum", "seed+starts_at", ("inputs",), "starts_at"),
])
def test_a_needed_boundary_gradient_is_asked_of_the_grad_call(algorithm, flags, needed,
                                                              grad_flags):
    """A boundary input is passed (and keyed) only where its gradient is needed."""
    _, call, outputs, (grad, *_), _ = case(algorithm, flags, "env", "float32")
    key = grad_call(call, grad, needed).key
    assert key == ProblemKey(GRAD_ALGORITHMS[algorithm], call.n, call.t, "float32", "env",
                             grad_flags)


def test_a_backward_pass_is_keyed_memoised_and_explained_as_its_own_problem():
    key = ProblemKey("gae", 4, 10, "float32", "env", "next+trunc")
    kwargs = random_inputs(key, seed=2)
    grad_key = ProblemKey("gae_grad", 4, 10, "float32", "env", "next+trunc")
    for _ in range(2):
        rewards = kwargs["rewards"].clone().requires_grad_()
        ESTIMATORS["gae"](**{**kwargs, "rewards": rewards}).sum().backward()
    decisions = memo.decisions()
    assert (grad_key, torch.device("cpu")) in decisions
    assert not any(k.algorithm.startswith("adjoint_scan") for k, _ in decisions)
    explained = dispatch.explain("gae_grad", 4, 10, flags="next+trunc", device="cpu")
    assert explained.key == grad_key
    assert explained.strategy == decisions[(grad_key, torch.device("cpu"))].strategy


@pytest.mark.parametrize("strategy", ["flat", "lookback"])
def test_public_backward_with_a_forced_triton_strategy(strategy):
    """The grad kernel under the interpreter through the public functions, batch dims
    and a per-env input included."""
    g = torch.Generator().manual_seed(5)
    shape = (2, 3, 13)
    r = torch.randn(shape, generator=g, requires_grad=True)
    v = torch.randn(shape, generator=g, requires_grad=True)
    last = torch.randn(2, 3, generator=g, requires_grad=True)
    term = (torch.rand(shape, generator=g) < 0.2).float()
    weights = torch.randn(shape, generator=g)
    grads = {}
    for forced in (None, strategy):
        for x in (r, v, last):
            x.grad = None
        with rt.force(forced or "torch"):   # the backward pass's dispatch reads it too
            adv = rt.compute_gae(r, v, term, gamma=0.9, lambda_=0.8, last_value=last)
            (adv * weights).sum().backward()
        grads[forced] = [x.grad.clone() for x in (r, v, last)]
    # last_value requires grad: the grad call writes its gradient (the "last_value" flag).
    decision = memo.decisions()[(ProblemKey("gae_grad", 6, 13, flags="last_value"),
                                 torch.device("cpu"))]
    assert decision.strategy == strategy
    for a, b in zip(grads[None], grads[strategy], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("wide", [("values",), ("values", "last_value"), ("last_value",)])
def test_wider_inputs_and_boundary_gradients_are_not_rounded_to_16_bits(wide):
    """bfloat16 rewards beside float32 values and last_value: the float32 gradients are as
    accurate as float32 allows (the grad call writes float32), not bfloat16's 3e-3."""
    g = torch.Generator().manual_seed(11)
    n, t = 16, 40
    r = torch.randn(n, t, generator=g).bfloat16()
    v = torch.randn(n, t, generator=g)
    last = torch.randn(n, generator=g)
    term = (torch.rand(n, t, generator=g) < 0.05).float()
    kwargs = dict(rewards=r, values=v, terminateds=term, last_value=last, gamma=0.99,
                  lambda_=0.95)
    call = prepare_call("gae", **kwargs)
    outputs = dispatch.run(call)
    grad = torch.randn(n, t, generator=g).bfloat16()
    assert grad_call(call, grad, wide).out_dtype == torch.float32
    found = gradients(call, outputs, (grad,), wide)
    want = reference_vjp("gae", (grad,), wide, **kwargs)
    for name in wide:
        torch.testing.assert_close(found[name].float(), want[name].float(), rtol=2e-5,
                                   atol=2e-5, msg=name)


def test_a_16_bit_step_writes_16_bit_gradients():
    """Boundary gradients included: the kernel writes them from float32 z, rounded once."""
    _, call, _, (grad,), _ = case("gae", "bootstrap+trunc", "env", "bfloat16")
    assert grad_call(call, grad, ("rewards", "values")).out_dtype == torch.bfloat16
    scan = grad_call(call, grad, ("rewards", "bootstrap_values"))
    assert scan.out_dtype == torch.bfloat16 and "bootstrap_values" in scan.tensors
    found = gradients(call, dispatch.run(call), (grad,), ("rewards", "bootstrap_values"))
    assert {g.dtype for g in found.values()} == {torch.bfloat16}


@pytest.mark.parametrize(("algorithm", "flags"), [
    ("gae", "bootstrap+trunc"), ("gae", "next+trunc"), ("gae", "last_value"),
    ("lambda_returns", "bootstrap+trunc"), ("discounted_returns", "bootstrap+trunc"),
    ("vtrace", "bootstrap+trunc"), ("vtrace", "next+trunc"), ("vtrace", "last_value")])
def test_boundary_gradients_read_any_non_zero_flag_as_true(algorithm, flags):
    """Flags of -1, 0.5 and NaN are true on the boundary gradients' path too (SPEC), as
    in the reference."""
    kwargs, call, outputs, grads, names = case(algorithm, flags, "env")
    for name in ("terminateds", "truncateds", "dones"):
        if name in kwargs:
            odd = kwargs[name].clone()
            odd[odd != 0] = torch.tensor([-1.0, 0.5, float("nan")],
                                         dtype=odd.dtype).repeat(odd.numel())[:int(
                                             (odd != 0).sum())]
            kwargs[name] = odd
    call = prepare_call(algorithm, **kwargs)
    outputs = dispatch.run(call)
    want = reference_vjp(algorithm, grads, names, **kwargs)
    found = gradients(call, outputs, grads, names)
    for name in names:
        torch.testing.assert_close(found[name].reshape(want[name].shape), want[name],
                                   msg=f"d/d{name}")
