"""Synthetic problems: the byte counts behind every HBM floor, and the random inputs."""

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
