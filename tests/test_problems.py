"""Synthetic problems: the byte counts behind every HBM floor, and the random inputs."""

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.problems import data_bytes, random_inputs


def test_gae_bytes_by_hand():
    # rewards, values, terminateds read and advantages written: 4 x 4 bytes per step.
    assert data_bytes(ProblemKey("gae", 2, 3)) == 6 * 16
    # bfloat16 data with bfloat16 flags: 4 x 2 bytes per step.
    assert data_bytes(ProblemKey("gae", 2, 3, "bfloat16"), flag_itemsize=2) == 6 * 8
    # bfloat16 data with the default float32 flags.
    assert data_bytes(ProblemKey("gae", 2, 3, "bfloat16")) == 6 * 10


def test_retrace_bytes_by_hand():
    # Two [N, T, 8] float32 inputs (64), int64 actions (8), behaviour probs, q, rewards,
    # terminateds, truncateds (5 x 4) and two outputs (8): 100 bytes per step.
    key = ProblemKey("retrace", 1, 1, flags="trunc", a=8)
    assert data_bytes(key) == 100


def test_vtrace_grad_bytes_by_hand():
    # Reads g_vs, g_adv, vs, lpt, lpb, values, rewards, terminateds (8 x 4) and writes the
    # gradients of lpt, values, rewards (3 x 4): 44 bytes per step. Its boundary input is
    # read and its gradient written: 8 more per step, or 8 per row for last_value.
    assert data_bytes(ProblemKey("vtrace_grad", 2, 3)) == 6 * 44
    assert data_bytes(ProblemKey("vtrace_grad", 2, 3, flags="bootstrap")) == 6 * 52
    assert data_bytes(ProblemKey("vtrace_grad", 2, 3, flags="last_value")) == 6 * 44 + 2 * 8


def test_per_env_inputs_count_once_per_row():
    plain = data_bytes(ProblemKey("gae", 5, 7))
    assert data_bytes(ProblemKey("gae", 5, 7, flags="last_value")) == plain + 5 * 4


def test_flags_take_the_requested_dtype_and_are_zero_or_one():
    kwargs = random_inputs(ProblemKey("gae", 4, 50, "bfloat16", flags="trunc"),
                           flag_dtype=torch.bfloat16)
    for name in ("terminateds", "truncateds"):
        flags = kwargs[name]
        assert flags.dtype == torch.bfloat16
        assert set(flags.float().unique().tolist()) <= {0.0, 1.0}
    assert kwargs["rewards"].dtype == torch.bfloat16


def test_inputs_drawn_on_the_device_keep_shapes_dtypes_and_flags():
    """``on_device`` draws other values (the device's generator) of the same kind."""
    key = ProblemKey("retrace", 5, 7, "bfloat16", "time", "trunc", 3)
    host, dev = random_inputs(key, "cpu", 3), random_inputs(key, "cpu", 3, on_device=True)
    assert host.keys() == dev.keys()
    for name, value in host.items():
        if isinstance(value, torch.Tensor):
            assert (value.shape, value.dtype) == (dev[name].shape, dev[name].dtype), name
    assert set(dev["terminateds"].unique().tolist()) <= {0.0, 1.0}
    assert int(dev["actions"].max()) < 3


def _by_row(kwargs, name, key):
    """``kwargs[name]`` as float [N, T]."""
    value = kwargs[name].float()
    return value.t() if key.time_major else value


@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("flag_dtype", [torch.float32, torch.bool, torch.int32])
@pytest.mark.parametrize(("n", "t"), [(1, 1), (2, 1), (5, 1), (1, 2), (3, 7), (7, 3), (1, 33),
                                      (12, 6), (4, 200)])
def test_every_flag_puts_each_flag_in_every_row(n, t, layout, flag_dtype):
    """Each row has a termination, an effective truncation (no termination at that step)
    and so an episode boundary; rows 0 and 1 have them on the first and last steps."""
    for seed in range(3):
        for algorithm, flags in (("vtrace", "trunc"), ("retrace", "trunc"), ("gae", "none"),
                                 ("eligibility_traces", "none"),
                                 ("episodic_prefix_sum", "starts_at")):
            key = ProblemKey(algorithm, n, t, "float32", layout, flags,
                             3 if algorithm == "retrace" else 0)
            kwargs = random_inputs(key, seed=seed, flag_dtype=flag_dtype, every_flag=True)
            what = f"{key.as_text()} seed {seed}"
            if algorithm in ("eligibility_traces", "episodic_prefix_sum"):
                dones = _by_row(kwargs, "dones", key)
                assert (dones.sum(1) >= 1).all(), what
                assert dones[0, 0] == 1 and (n < 2 or dones[1, t - 1] == 1), what
                continue
            term = _by_row(kwargs, "terminateds", key)
            assert kwargs["terminateds"].dtype == flag_dtype
            if "truncateds" not in kwargs:
                assert (term.sum(1) >= 1).all(), what
                continue
            trunc = _by_row(kwargs, "truncateds", key) * (1 - term)
            done = torch.maximum(term, trunc)
            if t == 1:   # one step per row: the rows take turns
                assert (term[0::2].sum(1) >= 1).all() and (trunc[1::2].sum(1) >= 1).all(), what
            else:
                assert (term.sum(1) >= 1).all() and (trunc.sum(1) >= 1).all(), what
                assert term[0, 0] == 1 and trunc[0, t - 1] == 1, what
                if n > 1:
                    assert term[1, t - 1] == 1 and trunc[1, 0] == 1, what
            assert (done.sum(1) >= 1).all(), what


def test_every_flag_keeps_the_seeds_other_inputs():
    """The planted flags are drawn last: every other input is the seed's usual one, and
    the random flags are kept (planting only adds flags, or moves a termination)."""
    key = ProblemKey("vtrace", 6, 40, "bfloat16", "time", "bootstrap+trunc")
    plain, planted = random_inputs(key, seed=4), random_inputs(key, seed=4, every_flag=True)
    for name, value in plain.items():
        if name in ("terminateds", "truncateds"):
            continue
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, planted[name]), name
        else:
            assert value == planted[name], name
    assert bool((planted["truncateds"] >= plain["truncateds"]).all())
    assert int((planted["terminateds"] != plain["terminateds"]).sum()) <= 2 * key.n
    assert not torch.equal(planted["terminateds"], plain["terminateds"])
