"""Problem keys: text round trip and which flags an estimator's key may carry."""

import pytest
import torch

from rltriton_tune.algorithms import ALGORITHMS
from rltriton_tune.call import ProblemKey


@pytest.mark.parametrize("text", [
    "gae|none|float32|env|N=16|T=32",
    "gae|bootstrap+trunc|bfloat16|time|N=5|T=300000",
    "retrace|trunc|float32|env|N=900|T=400|A=8",
    "episodic_prefix_sum|starts_at|float16|env|N=1|T=1",
])
def test_text_round_trip(text):
    assert ProblemKey.from_text(text).as_text() == text


def test_retrace_always_has_truncations():
    """Retrace takes ``truncateds`` in every call, so its kernels read them: a key without
    the flag describes no call and would gate every config against the wrong inputs."""
    assert ALGORITHMS["retrace"].required_flags == {"trunc"}
    with pytest.raises(ValueError, match=r"retrace .* always \['trunc'\], got 'none'"):
        ProblemKey.from_text("retrace|none|float32|env|N=900|T=400|A=8")


@pytest.mark.parametrize("text, why", [
    ("gae|starts_at|float32|env|N=4|T=4", "starts_at"),
    ("discounted_returns|bogus|float32|env|N=4|T=4", "bogus"),
    ("gae|none|float32|env|N=4", "malformed"),
    ("gae|none|float99|env|N=4|T=4", "malformed"),
])
def test_malformed_keys_are_refused(text, why):
    with pytest.raises(ValueError, match=why):
        ProblemKey.from_text(text)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_required_flags_are_possible(name):
    spec = ALGORITHMS[name]
    assert spec.required_flags <= spec.possible_flags


def test_a_replaced_call_derives_its_device_and_key_again():
    """``dataclasses.replace`` with other tensors keeps no device or key derived from the
    old ones (the validator's Call carries its device, and a key is cached)."""
    import dataclasses

    from rltriton_tune.estimators import prepare_call

    rewards = torch.zeros(2, 5)
    call = prepare_call("discounted_returns", rewards=rewards, terminateds=torch.zeros(2, 5),
                        gamma=0.9)
    assert call.device == torch.device("cpu") and call.key.flags == "none"
    moved = {name: x.to("meta") for name, x in call.tensors.items()}
    moved["truncateds"] = torch.zeros(2, 5, device="meta")
    other = dataclasses.replace(call, tensors=moved)
    assert other.device == torch.device("meta")
    assert other.key.flags == "trunc"
