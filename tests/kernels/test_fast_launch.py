"""The direct-launch path of :class:`FastLaunch` gives the same results as Triton's generic one."""

from __future__ import annotations

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels import STRATEGY_NAMES, strategies
from rltriton_tune.kernels import launch as launch_module
from rltriton_tune.kernels.launch import OUTPUT_SLOTS, POINTER_ARGS, SLOTS, FastLaunch, Packer

from .cases import check_outputs, expected, make_call


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
    output dtype (``new_empty``), in another dtype, or a subclass (``torch.empty``)."""
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
TENSORS_BY_ADDRESS: dict[int, torch.Tensor] = {}


class InterpretedBinary:
    """A real kernel behind Triton's compiled-launch interface, run by the interpreter:
    ``run`` takes the direct path's positional arguments and binds them to the kernel's
    parameter names, so an argument out of place shows as wrong numbers or an error."""

    function, packed_metadata = "fn", "meta"

    def __init__(self, kernel, options, log):
        self.kernel, self.options, self.log = kernel, options, log

    def run(self, gx, gy, gz, stream, function, metadata, launch_metadata, enter, exit_,
            *args):
        assert (stream, function, metadata) == (0, "fn", "meta")
        assert (launch_metadata, enter, exit_) == (None, None, None)
        self.log.append("direct")
        # The direct path passes tensors as addresses: map them back for the interpreter.
        args = [*(None if a is None else TENSORS_BY_ADDRESS[a] for a in args[:POINTER_ARGS]),
                *args[POINTER_ARGS:]]
        named = dict(zip(self.kernel.arg_names, args, strict=True))
        self.kernel[(gx, gy, gz)](**named, **self.options)


class Interpreted:
    """A JIT kernel whose generic launch runs in the interpreter and returns a binary."""

    def __init__(self, kernel, log):
        self.kernel, self.log = kernel, log
        self.arg_names = kernel.arg_names

    def __getitem__(self, grid):
        def generic(*args, **consts):
            self.log.append("generic")
            self.kernel[grid](*args, **consts)
            options = {k: v for k, v in consts.items() if k not in self.arg_names}
            return InterpretedBinary(self.kernel, options, self.log)
        return generic


@pytest.fixture
def direct_on_cpu(monkeypatch):
    """Every strategy's FastLaunch takes its direct path on CPU tensors (the kernels run
    in the interpreter either way); returns the launch log of each FastLaunch made."""
    logs = []

    class DirectOnCpu(FastLaunch):
        def __init__(self, kernel, grid, consts, pointers=None, slots=None, **kwargs):
            logs.append([])
            interpreting = launch_module.interpreting
            launch_module.interpreting = lambda: False   # only while deciding the path
            try:
                super().__init__(Interpreted(kernel, logs[-1]), grid, consts, pointers, slots,
                                 **kwargs)
            finally:
                launch_module.interpreting = interpreting
            assert self._direct, "the kernel's constexprs are not the signature's tail"

        def __call__(self, args):
            TENSORS_BY_ADDRESS.clear()
            TENSORS_BY_ADDRESS.update((x.data_ptr(), x) for x in args[:POINTER_ARGS]
                                      if x is not None)
            super().__call__(args)

    import importlib

    for name in STRATEGY_NAMES:
        module = importlib.import_module(f"rltriton_tune.kernels.{name}")
        if hasattr(module, "FastLaunch"):  # columns launches through lookback's launcher
            monkeypatch.setattr(module, "FastLaunch", DirectOnCpu)
    monkeypatch.setattr(launch_module, "current_stream", lambda device: 0)
    monkeypatch.setattr(launch_module, "current_device", lambda: 0)
    return logs


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
