"""The direct-launch path of :class:`FastLaunch` gives the same results as Triton's generic one."""

from __future__ import annotations

import pytest
import torch

from rltriton_tune import force
from rltriton_tune.algorithms import ESTIMATOR_NAMES
from rltriton_tune.call import ProblemKey
from rltriton_tune.estimators import ESTIMATORS, prepare_call
from rltriton_tune.kernels import STRATEGY_NAMES, strategies
from rltriton_tune.kernels import launch as launch_module
from rltriton_tune.kernels.launch import OUTPUT_SLOTS, POINTER_ARGS, SLOTS, FastLaunch, Packer
from rltriton_tune.problems import random_inputs
from rltriton_tune.state import STATE

from .cases import FLAG_SETS, check_outputs, expected, make_call, small_params
from .direct import install_direct_on_cpu


class FakeCompiled:
    """What Triton's generic launch returns: a binary with a direct launcher."""

    function = "fn"
    packed_metadata = "meta"

    def __init__(self, log):
        self.log = log

    def run(self, *args):
        self.log.append(("direct", args))


class FakeKernel:
    """A JIT kernel with runtime args P0..P7, O0, O1, O2, N and constexpr BLOCK."""

    arg_names = [f"P{i}" for i in range(8)] + ["O0", "O1", "O2", "N", "BLOCK"]

    def __init__(self):
        self.log = []

    def __getitem__(self, grid):
        def generic(*args, **consts):
            self.log.append(("generic", args, consts))
            return FakeCompiled(self.log)
        return generic


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(launch_module, "interpreting", lambda: False)
    monkeypatch.setattr(launch_module, "current_stream", lambda device: 77)
    monkeypatch.setattr(launch_module, "current_device", lambda: 0)
    kernel = FakeKernel()
    return kernel, FastLaunch(kernel, (5,), {"BLOCK": 16, "num_warps": 4})


def _args(dtype=torch.float32, offset=0):
    base = torch.zeros(64, dtype=dtype)
    return [base[offset:]] * POINTER_ARGS + [100]


def test_second_launch_calls_the_binary_with_constexprs_appended(fast):
    kernel, launcher = fast
    args = _args()
    launcher(args)
    launcher(args)
    assert [entry[0] for entry in kernel.log] == ["generic", "direct"]
    direct = kernel.log[1][1]
    assert direct[:4] == (5, 1, 1, 77)                     # grid, then the current stream
    assert direct[4:6] == ("fn", "meta")
    # Runtime args, the tensors as their addresses, then BLOCK.
    assert list(direct[9:]) == [*(x.data_ptr() for x in args[:POINTER_ARGS]),
                                *args[POINTER_ARGS:], 16]


def test_new_pointer_dtypes_compile_their_own_variant(fast):
    kernel, launcher = fast
    launcher(_args(torch.float32))
    launcher(_args(torch.bfloat16))
    launcher(_args(torch.bfloat16))
    assert [entry[0] for entry in kernel.log] == ["generic", "generic", "direct"]


def test_misaligned_pointers_always_take_the_generic_path(fast):
    kernel, launcher = fast
    launcher(_args())
    launcher(_args(offset=1))
    assert [entry[0] for entry in kernel.log] == ["generic", "generic"]


def test_a_launch_hook_takes_the_generic_path(fast, monkeypatch):
    kernel, launcher = fast
    monkeypatch.setattr(launcher._knobs, "launch_enter_hook", lambda metadata: None)
    launcher(_args())
    launcher(_args())
    assert [entry[0] for entry in kernel.log] == ["generic", "generic"]


def test_a_failing_direct_launch_falls_back_for_good(fast):
    kernel, launcher = fast
    launcher(_args())

    def broken(stream, args):
        raise TypeError("unexpected launcher signature")

    variant = next(iter(launcher._compiled))
    launcher._compiled[variant] = broken
    launcher(_args())
    launcher(_args())
    assert [entry[0] for entry in kernel.log] == ["generic", "generic", "generic"]


def test_a_bad_argument_raises_and_keeps_the_direct_path(fast):
    """A caller's error (here a missing tensor) raises as on the generic path; only a
    failing launch turns the direct path off."""
    kernel, launcher = fast
    args = _args()
    launcher(args)
    launcher(args)
    with pytest.raises(AttributeError):
        launcher([None, *args[1:]])
    launcher(args)
    assert launcher.direct
    assert [entry[0] for entry in kernel.log] == ["generic", "direct", "direct"]


def test_listed_pointers_decide_alignment_and_variant(monkeypatch):
    """With ``pointers``, only the listed positions are read, and each still decides."""
    monkeypatch.setattr(launch_module, "interpreting", lambda: False)
    monkeypatch.setattr(launch_module, "current_stream", lambda device: 77)
    monkeypatch.setattr(launch_module, "current_device", lambda: 0)
    kernel = FakeKernel()
    # The first output (position SLOTS) is the third listed tensor.
    launcher = FastLaunch(kernel, (5,), {"BLOCK": 16}, pointers=(0, 3, SLOTS),
                          slots=(0, 0, 0, 1, *[0] * (SLOTS - 4), *[2] * OUTPUT_SLOTS))
    args = _args()
    launcher(args)
    launcher(args)
    misaligned = list(args)
    misaligned[3] = _args(offset=1)[0]
    launcher(misaligned)
    other_dtype = list(args)
    other_dtype[SLOTS] = _args(torch.bfloat16)[0]
    launcher(other_dtype)
    launcher(other_dtype)
    assert [entry[0] for entry in kernel.log] == [
        "generic", "direct", "generic", "generic", "direct"]
    # Each pointer argument gets the address of the listed tensor its slot names.
    direct = kernel.log[-1][1][9:9 + POINTER_ARGS]
    assert direct == (*[args[0].data_ptr()] * SLOTS,
                      *[other_dtype[SLOTS].data_ptr()] * OUTPUT_SLOTS)


def test_pointers_without_slots_are_refused():
    with pytest.raises(ValueError, match="together"):
        FastLaunch(FakeKernel(), (5,), {"BLOCK": 16}, pointers=(0, 3, 8))


@pytest.mark.parametrize(("algorithm", "flags"), [
    ("gae", "last_value"), ("gae", "next+trunc"), ("vtrace", "bootstrap+trunc"),
    ("retrace", "trunc"), ("episodic_prefix_sum", "seed+starts_at"),
    ("gae_grad", "bootstrap+trunc"), ("eligibility_traces_grad", "seed")])
def test_packer_slots_name_each_pointer_arguments_tensor(algorithm, flags):
    """``pointers`` then ``pointer_slots`` give back every pointer argument, None past the
    listed tensors."""
    key = ProblemKey(algorithm, 6, 5, "float32", "env", flags,
                     a=3 if algorithm == "retrace" else 0)
    call, _ = make_call(key)
    pack = Packer(key, 64, 1)
    args, _ = pack.args(call)
    distinct = [*(args[i] for i in pack.pointers), None]
    assert len(pack.pointer_slots) == POINTER_ARGS
    assert all(distinct[j] is args[i] for i, j in enumerate(pack.pointer_slots))


@pytest.mark.parametrize(("algorithm", "flags", "layout"), [
    ("gae", "last_value", "env"), ("gae", "next+trunc", "time"),
    ("vtrace", "bootstrap+trunc", "env"), ("retrace", "trunc", "env"),
    ("eligibility_traces", "seed", "time"),
    ("episodic_prefix_sum", "none", "env"), ("adjoint_scan_forward", "none", "env"),
    ("gae_grad", "last_value", "time"), ("lambda_returns_grad", "bootstrap+trunc", "env"),
    ("episodic_prefix_sum_grad", "seed+starts_at", "env")])
def test_packer_pointers_cover_each_distinct_tensor_once(algorithm, flags, layout):
    """``Packer.pointers`` lists every tensor among the pointer arguments exactly once; the
    other pointer arguments are None (compiled as constexprs: no kernel parameter)."""
    key = ProblemKey(algorithm, 6, 5, "float32", layout, flags,
                     a=3 if algorithm == "retrace" else 0)
    call, _ = make_call(key)
    pack = Packer(key, 64, 1)
    args, outs = pack.args(call)
    listed = [args[i] for i in pack.pointers]
    assert len({id(x) for x in listed}) == len(listed)
    assert all(isinstance(x, torch.Tensor) for x in listed)
    assert all(args[i] is None for i in range(POINTER_ARGS) if i not in pack.pointers)
    # Every input the call passes, and every output, is among them.
    assert {id(x) for x in (*call.tensors.values(), *outs)} == {id(x) for x in listed}


@pytest.mark.parametrize("text", [
    "gae|last_value|float32|env|N=6|T=12", "gae|next+trunc|float32|time|N=12|T=5",
    "eligibility_traces|seed|float32|time|N=24|T=3", "retrace|trunc|float32|env|N=5|T=8|A=6",
    "retrace|trunc|float32|time|N=8|T=3|A=4", "vtrace|bootstrap+trunc|float32|env|N=1|T=16",
    "discounted_returns|none|float32|time|N=7|T=1"])
def test_packed_sizes_and_strides_are_those_of_the_calls_inputs(text):
    """The packer passes each key's strides as constants: they must be the strides of
    the call's (contiguous) inputs, divided by the alignment hints as the kernels expect
    (``scan.true_sizes``), along every dimension longer than 1."""
    key = ProblemKey.from_text(text)
    call, _ = make_call(key)
    pack = Packer(key, 64, 1)
    args, _ = pack.args(call)
    n_, t_, a_, sn, st, se, san, sat, saa, osn, ost = args[POINTER_ARGS:POINTER_ARGS + 11]
    assert (n_ * pack.align_n, t_ * pack.align_t, a_ * pack.align_a) == (key.n, key.t, key.a)
    ref = call.tensors[pack.ref].stride()
    env, step = (ref[1], ref[0]) if key.time_major else ref
    if key.n > 1:
        assert sn * pack.align_t == env
    if key.t > 1:
        assert st * pack.align_n == step
    if pack.per_env is not None and pack.per_env in call.tensors and key.n > 1:
        assert se == call.tensors[pack.per_env].stride(0)
    if key.a:
        pa = call.tensors[pack.per_action].stride()
        got = (san * pack.align_a, sat * pack.align_a, saa)
        assert got == ((pa[1], pa[0], pa[2]) if key.time_major else pa)
    out = args[SLOTS].stride()
    assert (osn * pack.align_t, ost * pack.align_n) == \
        ((out[1], out[0]) if key.time_major else out)


class _Marked(torch.Tensor):
    """A tensor subclass: the packer must not make outputs of it."""


@pytest.mark.parametrize(("algorithm", "flags", "layout"), [
    ("gae", "last_value", "env"), ("vtrace", "bootstrap+trunc", "time"),
    ("retrace", "trunc", "env"), ("gae_grad", "last_value", "env")])
@pytest.mark.parametrize("ref_dtype", ["out", "other", "subclass"])
def test_packer_outputs_are_fresh_plain_tensors_of_the_call(algorithm, flags, layout,
                                                            ref_dtype):
    """Outputs (and a boundary gradient) are fresh, contiguous plain tensors in the
    call's output dtype on its device, whatever the packer's reference input is: in the
    output dtype (``empty_like``), in another dtype, or a subclass (``torch.empty``)."""
    key = ProblemKey(algorithm, 6, 5, "float32", layout, flags,
                     a=3 if algorithm == "retrace" else 0)
    call, _ = make_call(key)
    pack = Packer(key, 64, 1)
    ref = call.tensors[pack.ref]
    if ref_dtype == "other":
        call.tensors[pack.ref] = ref.to(torch.float16)
    elif ref_dtype == "subclass":
        call.tensors[pack.ref] = ref.as_subclass(_Marked)
    before = {name: x.clone() for name, x in call.tensors.items()}
    args, outs = pack.args(call)
    shape = (key.t, key.n) if key.time_major else (key.n, key.t)
    assert len(outs) == pack.n_outputs + (pack.boundary_shape is not None)
    for i, y in enumerate(outs):
        assert type(y) is torch.Tensor
        assert y.dtype == call.out_dtype and y.device == ref.device and y.is_contiguous()
        assert tuple(y.shape) == (shape if i < pack.n_outputs else pack.boundary_shape)
        assert all(y.data_ptr() != x.data_ptr() for x in call.tensors.values())
    assert len({y.data_ptr() for y in outs}) == len(outs)
    for name, x in call.tensors.items():  # inputs untouched
        assert torch.equal(x, before[name])


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("algorithm", ["gae", "vtrace", "retrace", "eligibility_traces"])
def test_repeated_launches_use_fresh_data(algorithm, strategy):
    """Calls after the first take the direct path: each must compute on its own inputs."""
    key = ProblemKey(algorithm, 300, 700, "float32", "env",
                     "trunc" if algorithm == "retrace" else "none",
                     a=5 if algorithm == "retrace" else 0)
    launcher = strategies()[strategy].prepare(key, {})
    for seed in range(3):
        call, kwargs = make_call(key, device="cuda", seed=seed)
        check_outputs(launcher(call), expected(algorithm, kwargs), call,
                      f"{strategy} call {seed}")


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_real_triton_keeps_the_direct_path(strategy, monkeypatch):
    """With the installed Triton's own compiled launcher, launches after the first stay
    on the direct path: a launcher ABI this code does not match would turn it off
    silently (the results stay right, through the generic path) and cost every call
    Triton's argument binding."""
    import importlib

    made: list[FastLaunch] = []

    class Recorded(FastLaunch):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    for name in STRATEGY_NAMES:
        module = importlib.import_module(f"rltriton_tune.kernels.{name}")
        if hasattr(module, "FastLaunch"):
            monkeypatch.setattr(module, "FastLaunch", Recorded)
    key = ProblemKey("gae", 300, 700, "float32", "env", "last_value")
    impl = strategies()[strategy]
    launcher = type(impl)()._launcher(key, impl.validate(key, {}))
    for seed in range(3):
        call, kwargs = make_call(key, device="cuda", seed=seed)
        check_outputs(launcher(call), expected("gae", kwargs), call, f"{strategy} {seed}")
    assert made and all(k.direct and k.binaries == 1 for k in made), \
        [(k.direct, k.binaries) for k in made]
    # ... and calls Triton's C launch function itself, where this Triton's launcher layout
    # is a known one (kernels/native_launch.py).
    import triton

    if triton.__version__.startswith(("3.6.", "3.8.", "3.9.")):
        assert all(k.native for k in made)


@pytest.mark.gpu
def test_misaligned_input_takes_the_generic_path():
    key = ProblemKey("gae", 64, 33, "float32", "env", "none")
    launcher = strategies()["tiled"].prepare(key, {})
    call, kwargs = make_call(key, device="cuda", seed=0)
    check_outputs(launcher(call), expected("gae", kwargs), call, "aligned")
    # Same values, but rewards now starts 4 bytes into its allocation.
    rewards = call.tensors["rewards"]
    shifted = torch.empty(rewards.numel() + 1, device="cuda")[1:].view_as(rewards)
    shifted.copy_(rewards)
    assert shifted.data_ptr() % 16
    call.tensors["rewards"] = shifted
    check_outputs(launcher(call), expected("gae", kwargs), call, "misaligned")


#: The tensors of the launch in progress, by address (see ``direct_on_cpu``).
@pytest.fixture
def direct_on_cpu(monkeypatch):
    return install_direct_on_cpu(monkeypatch)


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize(("algorithm", "flags", "layout"), [
    ("vtrace", "bootstrap+trunc", "env"), ("retrace", "trunc", "time")])
def test_direct_path_packs_the_arguments_of_real_kernels(direct_on_cpu, strategy, algorithm,
                                                         flags, layout):
    """The real kernels launched through the direct path (runtime arguments, then the
    constexprs in signature order) give the reference's numbers, call after call."""
    from rltriton_tune.algorithms import ALGORITHMS

    from .cases import small_params

    scalars = {k: v for k, v in {"gamma": 0.9, "lambda_": 0.8, "rho_bar": 1.7, "c_bar": 0.6}
               .items() if k in ALGORITHMS[algorithm].scalars}
    key = ProblemKey(algorithm, 3, 9, "float32", layout, flags,
                     a=3 if algorithm == "retrace" else 0)
    launcher = type(strategies()[strategy])().prepare(key, small_params(strategy, key.t))
    for seed in range(2):
        call, kwargs = make_call(key, seed=seed, **scalars)
        check_outputs(launcher(call), expected(algorithm, kwargs), call, f"call {seed}")
    assert direct_on_cpu and all(log == ["generic", "direct"] for log in direct_on_cpu)


def test_pointer_and_output_slots_of_the_grad_algorithms():
    """V-trace's grad algorithm fills all ten input slots, its exclusive boundary inputs
    sharing the last one, and writes a boundary gradient after three outputs in O3; a
    single-output grad algorithm writes it in O2. F_ENV = 2 marks a per-env input read
    at T-1 of a forward scan (any tile may hold it)."""
    def pack(text):
        return Packer(ProblemKey.from_text(text), 64, 1)

    for flags, boundary in (("last_value", "last_value"), ("bootstrap+trunc", "bootstrap_values"),
                            ("next", "next_values")):
        p = pack(f"vtrace_grad|{flags}|float32|env|N=4|T=8")
        assert len(p.slots) == SLOTS and p.slots[-1] == boundary
        assert p.output_slots == (0, 1, 2, 3)
    assert pack("vtrace_grad|none|float32|env|N=4|T=8").output_slots == (0, 1, 2, None)
    assert pack("gae_grad|bootstrap|float32|env|N=4|T=8").output_slots == (0, 1, 2, None)
    assert pack("discounted_returns_grad|bootstrap|float32|env|N=4|T=8").output_slots == \
        (0, None, 1, None)
    assert pack("gae|none|float32|env|N=4|T=8").slot_inputs[3:] == (None,) * (SLOTS - 3)
    assert pack("vtrace_grad|last_value|float32|env|N=4|T=8").constexprs["F_ENV"] == 2
    assert pack("gae_grad|last_value|float32|env|N=4|T=8").constexprs["F_ENV"] is False
    assert pack("gae|last_value|float32|env|N=4|T=8").constexprs["F_ENV"] is True
    assert pack("eligibility_traces|seed|float32|env|N=4|T=8").constexprs["F_ENV"] is True



def _usual_call(algorithm: str, flags: str, layout: str, seed: int):
    """A public function's call with ``flags``: the key, the function, its arguments."""
    key = ProblemKey(algorithm, 5, 11, layout=layout, flags=flags,
                     a=3 if algorithm == "retrace" else 0)
    kwargs = random_inputs(key, seed=seed)
    if seed:  # the call's own scalars, not the first call's
        kwargs = {k: v * 0.5 if isinstance(v, float) else v for k, v in kwargs.items()}
    return key, ESTIMATORS[algorithm], kwargs


@pytest.mark.parametrize("strategy", ["flat", "tiled", "sequential"])
@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize(("algorithm", "flags"), [
    (name, flags) for name in ESTIMATOR_NAMES
    for flags in dict.fromkeys([FLAG_SETS[name][0], FLAG_SETS[name][-1]])])
def test_bound_launch_serves_the_usual_call_with_the_general_paths_result(
        direct_on_cpu, strategy, layout, algorithm, flags):
    """The usual call's fast path launches through ``FastLaunch.bind`` once the key is
    memoised and its binary kept: the real kernel gets the argument list the general
    path packs (the interpreter binds them by name), with each call's own inputs and
    scalars."""
    with force(strategy, **small_params(strategy, 11)):
        for seed in range(4):
            key, function, kwargs = _usual_call(algorithm, flags, layout, seed)
            got = function(**kwargs)
            check_outputs(got if isinstance(got, tuple) else (got,),
                          expected(algorithm, kwargs), prepare_call(algorithm, **kwargs),
                          f"call {seed}")
            for out in got if isinstance(got, tuple) else (got,):  # allocated by the bound
                assert out.stride() == torch.empty(out.shape).stride()  # launch: contiguous
    bound = list(STATE.bound.values())
    assert len(bound) == 1 and callable(bound[0])
    # The first call decides and compiles (the generic launch); the others are bound.
    assert direct_on_cpu[-1] == ["generic", "direct", "direct", "direct"]


def _misaligned(x: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of ``x`` whose data starts 4 bytes past a 16-byte boundary."""
    storage = torch.empty(x.numel() + 1, dtype=x.dtype)
    out = storage[1:].view(x.shape)
    out.copy_(x)
    return out


def test_bound_launch_declines_misaligned_inputs_and_launch_hooks(direct_on_cpu, monkeypatch):
    """Where the direct path cannot launch, the bound launch hands the call back before
    launching anything, and it takes the general path's launch (Triton's generic one)."""
    with force("flat", **small_params("flat", 11)):
        key, function, kwargs = _usual_call("gae", "last_value", "env", 0)
        function(**kwargs)
        function(**kwargs)
        misaligned = {k: _misaligned(v) if isinstance(v, torch.Tensor) and v.dim() == 2 else v
                      for k, v in kwargs.items()}
        assert misaligned["rewards"].data_ptr() & 15
        check_outputs((function(**misaligned),), expected("gae", kwargs),
                      prepare_call("gae", **kwargs), "misaligned")
        monkeypatch.setattr(FastLaunch(FakeKernel(), (1,), {"BLOCK": 1})._knobs,
                            "launch_enter_hook", lambda metadata: None)
        check_outputs((function(**kwargs),), expected("gae", kwargs),
                      prepare_call("gae", **kwargs), "hooked")
    assert direct_on_cpu[-1] == ["generic", "direct", "generic", "generic"]
    assert callable(next(iter(STATE.bound.values())))


@pytest.mark.parametrize(("strategy", "algorithm", "flags", "params"), [
    ("flat", "retrace", "trunc", {"REDUCE_A": 1}),   # the action pre-pass: two kernels
    ("lookback", "gae", "none", {}),                 # arguments of its own
    ("split", "gae", "none", {}),                    # two kernels
])
def test_launchers_of_more_than_one_packed_kernel_offer_no_bound_launch(
        direct_on_cpu, strategy, algorithm, flags, params):
    with force(strategy, **{**small_params(strategy, 11), **params}):
        for seed in range(3):
            key, function, kwargs = _usual_call(algorithm, flags, "env", seed)
            got = function(**kwargs)
            check_outputs(got if isinstance(got, tuple) else (got,),
                          expected(algorithm, kwargs), prepare_call(algorithm, **kwargs),
                          f"call {seed}")
    assert list(STATE.bound.values()) == [False]


def test_recorded_calls_are_counted_not_bound(direct_on_cpu, monkeypatch, tmp_path):
    """A key that missed the database runs under the workload recorder's counting
    wrapper, which has no bound launch: every call is counted."""
    from rltriton_tune import dispatch
    from rltriton_tune.dispatch.record import read_record

    record = tmp_path / "record.json"
    monkeypatch.setenv("RLTRITON_TUNE_RECORD", str(record))
    dispatch.reset()
    for seed in range(3):
        key, function, kwargs = _usual_call("gae", "none", "env", seed)
        function(**kwargs)
    STATE.recorder.flush()
    assert list(STATE.bound.values()) == [False]
    assert [row["calls"] for row in read_record(record)] == [3]


def test_vtrace_bars_the_division_finish_does_not_serve_take_the_exact_kernel(direct_on_cpu):
    """The bound launch of V-trace's division finish declines scalars its rule refuses
    (``c_bar = inf``) before launching; the general path then launches the exact finish's
    kernel, built on first use, and the usual bars go on through the bound launch."""
    # A config no other test forces: the strategy keeps launchers by key and config, and
    # this test's launches must be made through this test's FastLaunch.
    with force("flat", BLOCK_N=1, num_warps=1):
        key, function, kwargs = _usual_call("vtrace", "none", "env", 0)
        wide = {**kwargs, "rho_bar": 1.0, "c_bar": float("inf")}
        for call_kwargs in (kwargs, kwargs, wide, wide, kwargs):
            check_outputs(function(**call_kwargs), expected("vtrace", call_kwargs),
                          prepare_call("vtrace", **call_kwargs), f"c_bar={call_kwargs['c_bar']}")
    division, exact = direct_on_cpu[-2:]
    assert division == ["generic", "direct", "direct"]
    assert exact == ["generic", "direct"]
    assert callable(next(iter(STATE.bound.values())))


def test_a_bound_launch_for_one_device_declines_while_another_is_current():
    """Triton launches on the current device: a bound launch made for the memo key's
    device returns what declines (the general path's device guard then serves the call)
    while another device is current; without a device it checks none."""
    from rltriton_tune.kernels import launch

    lines = launch._launch_lines("d, ", "a, ", "None", device_index=1)
    check = lines.index("    if device != 1:")
    assert lines[check + 1] == "        return None"
    assert lines.index("    device = current_device()") < check < lines.index(
        "    plan = compiled.get((device, d, ))")
    assert not any("if device !=" in line for line in launch._launch_lines("d, ", "a, ", "None"))
