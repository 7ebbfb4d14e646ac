"""TorchRL's PPO loss with its GAE value estimator computed by rltriton-tune.

TorchRL's ``GAE`` module looks up its functional estimator by name at each call;
``rltriton_tune.torchrl.patch_torchrl()`` points those names at rltriton-tune's
equivalents for the duration of a ``with`` block (docs/torchrl.md). The loss,
the modules and the data layout (``[B, T]`` batch, ``[B, T, 1]`` values and
flags) stay TorchRL's.

Needs ``pip install torchrl``; runs on a CPU in seconds:
``python examples/torchrl_ppo_loss.py``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.modules import ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from rltriton_tune.torchrl import patch_torchrl

BATCH, STEPS, OBS, ACTIONS = 4, 32, 5, 3


def rollout(gen: torch.Generator) -> TensorDict:
    """A stand-in for a collector's output: TorchRL keys and shapes."""
    done = torch.rand(BATCH, STEPS, 1, generator=gen) < 0.05
    terminated = done & (torch.rand(BATCH, STEPS, 1, generator=gen) < 0.5)
    action = torch.randint(ACTIONS, (BATCH, STEPS), generator=gen)
    return TensorDict({
        "observation": torch.randn(BATCH, STEPS, OBS, generator=gen),
        "action": action,
        "action_log_prob": torch.full((BATCH, STEPS), -torch.log(torch.tensor(ACTIONS * 1.0))),
        "next": {
            "observation": torch.randn(BATCH, STEPS, OBS, generator=gen),
            "reward": torch.randn(BATCH, STEPS, 1, generator=gen),
            "done": done,
            "terminated": terminated,
        },
    }, batch_size=[BATCH, STEPS])


def main() -> None:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    actor = ProbabilisticActor(
        TensorDictModule(nn.Linear(OBS, ACTIONS), in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"], distribution_class=torch.distributions.Categorical,
        return_log_prob=True)
    critic = ValueOperator(nn.Linear(OBS, 1), in_keys=["observation"])
    loss_module = ClipPPOLoss(actor, critic, clip_epsilon=0.2)
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic)
    optimizer = torch.optim.Adam(loss_module.parameters(), lr=1e-2)

    for update in range(3):
        data = rollout(gen)
        with torch.no_grad():
            reference = advantage(data.clone())          # TorchRL's own estimator
            with patch_torchrl():
                advantage(data)                          # the same module, rltriton-tune
        torch.testing.assert_close(data["advantage"], reference["advantage"],
                                   rtol=1e-5, atol=1e-5)
        losses = loss_module(data)
        loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"update {update}: loss {loss.item():.4f}, "
              f"advantage mean {data['advantage'].mean().item():+.4f}")


if __name__ == "__main__":
    main()
