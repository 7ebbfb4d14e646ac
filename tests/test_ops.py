"""The estimators as custom operators (rltriton_tune.ops): schemas, fake implementations
and autograd formulas (torch.library.opcheck), and torch.compile(fullgraph=True)."""

from __future__ import annotations

import pytest
import torch

import rltriton_tune as rt
from rltriton_tune import ops
from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES, STARTS_AT
from rltriton_tune.autograd import differentiable
from rltriton_tune.call import ProblemKey, parse_flags
from rltriton_tune.estimators import ESTIMATORS
from rltriton_tune.problems import random_inputs

#: A flag set with every optional input the estimator can take at once.
FLAGS = {"gae": "bootstrap+trunc", "vtrace": "last_value", "retrace": "trunc",
         "lambda_returns": "bootstrap+trunc", "discounted_returns": "bootstrap+trunc",
         "eligibility_traces": "seed", "episodic_prefix_sum": "seed+starts_at"}


def kwargs_for(algorithm: str, n: int = 3, t: int = 5, device: str = "cpu",
               time_major: bool = False) -> dict:
    key = ProblemKey(algorithm, n, t, flags=FLAGS[algorithm],
                     layout="time" if time_major else "env",
                     a=4 if algorithm == "retrace" else 0)
    return random_inputs(key, device=device, seed=5)


def operator_args(algorithm: str, kwargs: dict) -> tuple:
    spec = ALGORITHMS[algorithm]
    return (*(kwargs.get(name) for name in spec.tensors),
            *(float(kwargs[name]) for name in spec.scalars), kwargs["time_major"],
            kwargs.get("boundary") == "starts_at")


def test_every_estimator_has_an_operator():
    assert set(ops.OPERATORS) == set(ESTIMATOR_NAMES)
    for name in ESTIMATOR_NAMES:
        for op in (name, f"{name}_backward", f"{name}_tensor_scalars",
                   f"{name}_tensor_scalars_backward"):
            assert hasattr(torch.ops.rltriton_tune, op), op


def tensor_scalar_args(algorithm: str, kwargs: dict) -> tuple:
    """``operator_args`` with every scalar a 0-d float64 tensor."""
    args = list(operator_args(algorithm, kwargs))
    k = len(ALGORITHMS[algorithm].tensors)
    for i in range(k, k + len(ALGORITHMS[algorithm].scalars)):
        args[i] = torch.tensor(args[i], dtype=torch.float64)
    return tuple(args)


@pytest.mark.parametrize("algorithm", ["gae", "vtrace", "retrace", "episodic_prefix_sum"])
def test_compile_fullgraph_with_tensor_scalars(algorithm):
    """Scalars given as 0-d tensors (arguments of the compiled function, one requiring
    grad) trace into the graph: the same values and input gradients as eager calls with
    Python numbers, and no gradient for the scalars."""
    torch._dynamo.reset()
    spec = ALGORITHMS[algorithm]
    kwargs = kwargs_for(algorithm)
    numbers = {name: float(kwargs.pop(name)) for name in spec.scalars}
    tensors = {name: torch.tensor(v, requires_grad=i == 0)
               for i, (name, v) in enumerate(numbers.items())}
    leaf = next(n for n in differentiable(algorithm) if kwargs.get(n) is not None)
    eager_x = kwargs[leaf].detach().clone().requires_grad_()
    compiled_x = kwargs[leaf].detach().clone().requires_grad_()
    function = ESTIMATORS[algorithm]
    compiled = torch.compile(lambda x, sc: function(**{**kwargs, leaf: x, **sc}),
                             fullgraph=True, backend="aot_eager")
    expected = function(**{**kwargs, leaf: eager_x, **numbers})
    got = compiled(compiled_x, tensors)
    expected, got = (r if isinstance(r, tuple) else (r,) for r in (expected, got))
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
    sum(o.sum() for o in expected).backward()
    sum(o.sum() for o in got).backward()
    torch.testing.assert_close(compiled_x.grad, eager_x.grad)
    assert all(x.grad is None for x in tensors.values())


@pytest.mark.parametrize("scalars", ["float", "Tensor"])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_opcheck(algorithm, scalars):
    """Both operators of each estimator: scalars as numbers, and as 0-d tensors."""
    kwargs = kwargs_for(algorithm)
    for name in differentiable(algorithm):
        if kwargs.get(name) is not None:
            kwargs[name].requires_grad_()
    forward, _ = ops.OPERATORS[algorithm].ops[scalars]
    args = (operator_args if scalars == "float" else tensor_scalar_args)(algorithm, kwargs)
    result = torch.library.opcheck(forward, args)
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_operator_matches_the_public_function(algorithm):
    kwargs = kwargs_for(algorithm, time_major=True)
    expected = ESTIMATORS[algorithm](**kwargs)
    got = ops.OPERATORS[algorithm].forward(*operator_args(algorithm, kwargs))
    for a, b in zip(got if isinstance(got, tuple) else (got,),
                    expected if isinstance(expected, tuple) else (expected,), strict=True):
        torch.testing.assert_close(a, b)
        assert a.untyped_storage().data_ptr() not in {
            x.untyped_storage().data_ptr() for x in kwargs.values() if torch.is_tensor(x)}


def test_operator_validates_like_the_public_function():
    kwargs = kwargs_for("gae")
    kwargs["values"] = kwargs["values"][:, :-1]
    with pytest.raises(ValueError, match="values has shape"):
        ops.estimate("gae", [kwargs.get(n) for n in ALGORITHMS["gae"].tensors], (0.9, 0.9),
                     False)


def _all_seven(tensors: dict[str, dict]) -> list[torch.Tensor]:
    """Calls every estimator; the graph also holds pointwise work around the calls."""
    outputs = []
    for algorithm in ESTIMATOR_NAMES:
        result = ESTIMATORS[algorithm](**tensors[algorithm])
        for out in result if isinstance(result, tuple) else (result,):
            outputs.append(out * 2 + 1)
    return outputs


def _differentiable_inputs(kwargs_by_algorithm: dict[str, dict]) -> list[torch.Tensor]:
    leaves = []
    for algorithm, kwargs in kwargs_by_algorithm.items():
        for name in differentiable(algorithm):
            if kwargs.get(name) is not None:
                kwargs[name] = kwargs[name].detach().clone().requires_grad_()
                leaves.append(kwargs[name])
    return leaves


def compile_check(device: str, backend: str = "inductor") -> None:
    """torch.compile(fullgraph=True) of a function calling all seven estimators equals eager,
    forward and backward."""
    torch._dynamo.reset()
    base = {a: kwargs_for(a, device=device) for a in ESTIMATOR_NAMES}
    eager_inputs = {a: dict(k) for a, k in base.items()}
    compiled_inputs = {a: dict(k) for a, k in base.items()}
    eager_leaves = _differentiable_inputs(eager_inputs)
    compiled_leaves = _differentiable_inputs(compiled_inputs)
    compiled = torch.compile(_all_seven, fullgraph=True, backend=backend)
    expected = _all_seven(eager_inputs)
    got = compiled(compiled_inputs)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
    weights = [torch.randn(o.shape, device=device, generator=None) for o in expected]
    sum((o * w).sum() for o, w in zip(expected, weights, strict=True)).backward()
    sum((o * w).sum() for o, w in zip(got, weights, strict=True)).backward()
    for a, b in zip(compiled_leaves, eager_leaves, strict=True):
        torch.testing.assert_close(a.grad, b.grad)


def test_compile_fullgraph_all_seven_cpu():
    compile_check("cpu")


@pytest.mark.parametrize("layout", ["time", "views"])
def test_compiled_backward_of_time_major_calls_and_transposed_inputs_cpu(layout):
    """Compiled graphs check each gradient's strides against the fake kernel's: time-major
    calls (whose gradients the backward computes transposed) and differentiable inputs
    given as transposed views of time-first tensors (what TorchRL's ``movedim`` makes)
    both run, and equal eager, forward and backward."""
    torch._dynamo.reset()
    time_major = layout == "time"
    base = {a: kwargs_for(a, time_major=time_major) for a in ESTIMATOR_NAMES}

    # One differentiable input, a view (the others plain tensors), as a training loop that
    # reads one tensor from a time-first buffer passes them.
    first = {a: differentiable(a)[0] for a in ESTIMATOR_NAMES}

    def viewed(algorithm: str, name: str, x: torch.Tensor) -> bool:
        return layout == "views" and name == first[algorithm] and x.dim() == 2

    def leaves() -> dict[tuple[str, str], torch.Tensor]:
        made = {}
        for algorithm, kwargs in base.items():
            for name in differentiable(algorithm):
                if kwargs.get(name) is not None and (layout == "time" or name == first[algorithm]):
                    x = kwargs[name].detach()
                    stored = x.t().contiguous() if viewed(algorithm, name, x) else x.clone()
                    made[(algorithm, name)] = stored.requires_grad_()
        return made

    def run(given: dict[tuple[str, str], torch.Tensor]) -> list[torch.Tensor]:
        outputs = []
        for algorithm in ESTIMATOR_NAMES:
            kwargs = dict(base[algorithm])
            for (owner, name), leaf in given.items():
                if owner == algorithm:
                    kwargs[name] = leaf.t() if viewed(owner, name, leaf) else leaf
            result = ESTIMATORS[algorithm](**kwargs)
            outputs += list(result) if isinstance(result, tuple) else [result]
        return outputs

    eager_leaves, compiled_leaves = leaves(), leaves()
    expected = run(eager_leaves)
    got = torch.compile(run, fullgraph=True)(compiled_leaves)
    weights = [torch.randn(o.shape) for o in expected]
    for outputs in (expected, got):
        sum((o * w).sum() for o, w in zip(outputs, weights, strict=True)).backward()
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
    for key, leaf in compiled_leaves.items():
        torch.testing.assert_close(leaf.grad, eager_leaves[key].grad, msg=str(key))


@pytest.mark.parametrize("bad, error, message", [
    ({"gamma": True}, TypeError, "gamma must be a Python number or a 0-d tensor, got bool"),
    ({"gamma": "0.9"}, TypeError, "gamma must be a Python number or a 0-d tensor, got str"),
    ({"gamma": 10**400}, ValueError, "gamma is too large for a float"),
    ({"time_major": 1}, TypeError, "time_major must be a Python bool, got int"),
    ({"time_major": None}, TypeError, "time_major must be a Python bool, got NoneType"),
    ({"rewards": [1.0]}, TypeError, "rewards must be a torch.Tensor, got list"),
])
def test_compiled_calls_refuse_what_eager_calls_refuse(bad, error, message):
    """Arguments that are not tensors are checked while tracing (the operator's schema
    would turn True into 1.0 and 1 into True): without fullgraph the eager error itself,
    with fullgraph torch's error carrying its message."""
    kwargs = {**kwargs_for("discounted_returns"), **bad}
    with pytest.raises(error, match=message):
        rt.compute_discounted_returns(**kwargs)
    torch._dynamo.reset()
    with pytest.raises(error, match=message):
        torch.compile(lambda: rt.compute_discounted_returns(**kwargs), backend="eager")()
    torch._dynamo.reset()
    with pytest.raises(Exception, match=message):
        torch.compile(lambda: rt.compute_discounted_returns(**kwargs), fullgraph=True,
                      backend="eager")()


def test_compiled_calls_take_numpy_and_fraction_scalars():
    """numpy scalars (which dynamo traces as 0-d arrays) and other real numbers compile
    with fullgraph and give the eager outputs."""
    import fractions

    import numpy as np

    kwargs = kwargs_for("gae")
    expected = rt.compute_gae(**{**kwargs, "gamma": 0.5, "lambda_": 0.75})
    for gamma, lambda_ in ((np.float32(0.5), np.float64(0.75)),
                           (fractions.Fraction(1, 2), np.int64(1) * 0.75)):
        torch._dynamo.reset()
        compiled = torch.compile(lambda g, lam: rt.compute_gae(**{**kwargs, "gamma": g,
                                                                  "lambda_": lam}),
                                 fullgraph=True, backend="aot_eager")
        torch.testing.assert_close(compiled(gamma, lambda_), expected)


def test_a_compiled_call_with_an_input_on_another_device_raises_the_eager_error():
    """An input on the meta device beside CPU ones: the operator's fake implementation
    (which also serves the meta device when the graph runs) makes the eager device check,
    instead of returning uninitialised outputs."""
    kwargs = {**kwargs_for("gae"), "terminateds": torch.zeros(3, 5, device="meta")}
    message = "terminateds is on meta but rewards is on cpu"
    with pytest.raises(ValueError, match=message):
        rt.compute_gae(**kwargs)
    torch._dynamo.reset()
    with pytest.raises(Exception, match=message):
        torch.compile(lambda: rt.compute_gae(**kwargs), fullgraph=True,
                      backend="aot_eager")()


def test_the_backward_operators_fake_outputs_match_the_real_ones():
    """A gradient not asked for is an empty tensor of the gradients' dtype in both the
    real and the fake backward (float64 here)."""
    n, t = 3, 5
    rewards = torch.randn(n, t, dtype=torch.float64)
    values = torch.randn(n, t, dtype=torch.float64)
    args = ([torch.ones(n, t, dtype=torch.float64)], [], [True, False, False, False, False],
            rewards, values, torch.zeros(n, t, dtype=torch.float64), None, None, None, None,
            0.9, 0.9, False, False)
    result = torch.library.opcheck(torch.ops.rltriton_tune.gae_backward.default, args,
                                   test_utils=("test_schema", "test_faketensor"))
    assert set(result.values()) == {"SUCCESS"}, result


def test_compiled_prefix_sum_refuses_an_unknown_boundary():
    x = kwargs_for("episodic_prefix_sum")
    torch._dynamo.reset()
    with pytest.raises(ValueError, match="boundary must be 'ends_at' or 'starts_at'"):
        torch.compile(lambda: rt.compute_episodic_prefix_sum(x["inputs"], x["dones"],
                                                             boundary="bogus"),
                      backend="eager")()


def test_compile_sees_no_dispatch_state():
    """The force context is read when the compiled graph runs, not baked in at trace time:
    the same compiled function follows a force that is entered after compiling."""
    torch._dynamo.reset()
    kwargs = kwargs_for("discounted_returns")
    compiled = torch.compile(lambda kw: rt.compute_discounted_returns(**kw), fullgraph=True,
                             backend="aot_eager")
    plain = compiled(kwargs)
    with rt.force("torch", mode="loop"):
        torch.testing.assert_close(compiled(kwargs), plain)
    with rt.force("torch", mode="chunked", chunk=1), pytest.raises(ValueError, match="chunk"):
        compiled(kwargs)          # a config rejected at run time: the force was read then
    explanation = torch._dynamo.explain(lambda kw: rt.compute_discounted_returns(**kw))(kwargs)
    assert explanation.graph_break_count == 0


def test_flag_names_in_the_cases_are_valid():
    for algorithm, flags in FLAGS.items():
        spec = ALGORITHMS[algorithm]
        assert parse_flags(flags) <= spec.possible_flags | {STARTS_AT}


@pytest.mark.gpu
def test_compile_fullgraph_all_seven_cuda():
    compile_check("cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_cuda_graph_capture_of_forward_and_backward(algorithm):
    kwargs = kwargs_for(algorithm, n=64, t=96, device="cuda")
    names = [n for n in differentiable(algorithm) if kwargs.get(n) is not None]
    leaves = [kwargs[n].detach().clone().requires_grad_() for n in names]

    def step() -> list[torch.Tensor]:
        result = ESTIMATORS[algorithm](**{**kwargs, **dict(zip(names, leaves, strict=True))})
        outputs = result if isinstance(result, tuple) else (result,)
        return list(torch.autograd.grad(sum(o.square().sum() for o in outputs), leaves))

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):            # warm-up: decisions, compilation, allocations
            expected = step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(captured, expected, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("compiled", [False, True])
def test_scalar_beyond_float_range_through_the_operator(compiled):
    """The operator path (a gradient to record, or torch.compile) names a scalar too large
    for a float as the eager path does, not Python's OverflowError inside the trace."""
    torch._dynamo.reset()
    kwargs = kwargs_for("gae")
    kwargs["rewards"] = kwargs["rewards"].clone().requires_grad_()
    kwargs["gamma"] = 10**400
    function = rt.compute_gae
    if compiled:
        function = torch.compile(function, backend="eager")
    with pytest.raises(ValueError, match="compute_gae: gamma is too large for a float"):
        function(**kwargs)
