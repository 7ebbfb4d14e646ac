"""A CleanRL-style PPO loop whose GAE is one rltriton-tune call.

CleanRL keeps time-major buffers ``[num_steps, num_envs]`` and stores ``dones[t]``,
the done flag of the observation *before* step t (shifted by one step), plus
``next_done`` / ``next_value`` for the observation after the last step. Its GAE
loop reads ``dones[t + 1]`` (``next_done`` at the end) as "step t ended the
episode". rltriton-tune wants the flag of step t itself, so the flags are
realigned once: ``terminateds = cat(dones[1:], next_done)``, and the value after
the last step is ``last_value=next_value`` (without it the bootstrap is zero).

Runs on a CPU in seconds: ``python examples/cleanrl_ppo.py``.
"""

from __future__ import annotations

import torch
from torch import nn

from rltriton_tune import compute_gae

NUM_ENVS, NUM_STEPS, OBS, ACTIONS = 8, 64, 4, 2
GAMMA, GAE_LAMBDA, UPDATES = 0.99, 0.95, 3


class ToyEnvs:
    """Vectorised toy task: reward 1 when the action matches the sign of obs[0];
    each episode ends with probability 5% per step and resets itself (like gym's
    vector envs, which return the first observation of the next episode)."""

    def __init__(self, gen: torch.Generator) -> None:
        self.gen = gen
        self.obs = torch.randn(NUM_ENVS, OBS, generator=gen)

    def step(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        reward = (action == (self.obs[:, 0] > 0).long()).float()
        done = torch.rand(NUM_ENVS, generator=self.gen) < 0.05
        self.obs = torch.randn(NUM_ENVS, OBS, generator=self.gen)
        return self.obs, reward, done.float()


def cleanrl_gae(rewards, values, dones, next_value, next_done):
    """CleanRL's own loop (ppo.py), kept here to check the realignment."""
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(NUM_STEPS)):
        if t == NUM_STEPS - 1:
            nextnonterminal, nextvalues = 1.0 - next_done, next_value
        else:
            nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
        delta = rewards[t] + GAMMA * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + GAMMA * GAE_LAMBDA * nextnonterminal * lastgaelam
    return advantages


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    envs = ToyEnvs(gen)
    agent_v = nn.Linear(OBS, 1)
    agent_pi = nn.Linear(OBS, ACTIONS)
    optimizer = torch.optim.Adam([*agent_v.parameters(), *agent_pi.parameters()], lr=1e-2)

    obs = torch.zeros(NUM_STEPS, NUM_ENVS, OBS)
    actions = torch.zeros(NUM_STEPS, NUM_ENVS, dtype=torch.long)
    logprobs, rewards, dones, values = (torch.zeros(NUM_STEPS, NUM_ENVS) for _ in range(4))
    next_obs, next_done = envs.obs, torch.zeros(NUM_ENVS)

    for update in range(UPDATES):
        with torch.no_grad():
            for step in range(NUM_STEPS):
                obs[step], dones[step] = next_obs, next_done
                dist = torch.distributions.Categorical(logits=agent_pi(next_obs))
                action = dist.sample()
                actions[step], logprobs[step] = action, dist.log_prob(action)
                values[step] = agent_v(next_obs).squeeze(-1)
                next_obs, rewards[step], next_done = envs.step(action)
            next_value = agent_v(next_obs).squeeze(-1)

            # The realignment: flag of step t = CleanRL's dones[t + 1].
            terminateds = torch.cat([dones[1:], next_done[None]])
            advantages = compute_gae(rewards, values, terminateds, gamma=GAMMA,
                                     lambda_=GAE_LAMBDA, last_value=next_value,
                                     time_major=True)
            expected = cleanrl_gae(rewards, values, dones, next_value, next_done)
            torch.testing.assert_close(advantages, expected, rtol=1e-5, atol=1e-5)
            returns = advantages + values

        # One PPO epoch over the whole batch (clip 0.2).
        dist = torch.distributions.Categorical(logits=agent_pi(obs))
        ratio = (dist.log_prob(actions) - logprobs).exp()
        adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2)).mean()
        v_loss = 0.5 * (agent_v(obs).squeeze(-1) - returns).pow(2).mean()
        loss = pg_loss + 0.5 * v_loss - 0.01 * dist.entropy().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"update {update}: mean reward {rewards.mean():.3f}, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
