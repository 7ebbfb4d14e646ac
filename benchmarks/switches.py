"""The flat kernel's code-path switches, each A/B'd at rl-triton's launch config against
rl-triton 0.1.3 on the same inputs.

At small env-major cells the backward estimators trail rl-triton by 5-8% where the
launch configs are the same (H200, float32, one row a program with rl-triton's warps:
GAE 333x150 2.25 against 2.08 µs, discounted returns 2.18 against 2.06), while the
forward ones are level (eligibility traces 2.04 against 2.02). Whatever costs that
time is in the kernel's code path, so each variant here builds a fresh ``flat``
launcher with one switch of :mod:`rltriton_tune.kernels.launch` changed:

* ``built``: as dispatch builds it;
* ``hints off``: no alignment hints (``ALIGN_HINTS``);
* ``runs off``: Triton's reverse scan instead of flipped per-thread runs (``FLIP_RUNS``);
* ``descending``: every backward tile holds its steps last to first and is scanned
  forward, rl-triton's load order (``DESCEND_ALWAYS``);
* ``descending, hints off``: both;

and variants of the config itself, where the config takes the parameter:

* ``two blocks``: registers a thread capped so that two programs fit a multiprocessor
  (``TWO_BLOCKS=1``: Triton's ``maxnreg``; no cap below 8 warps).

and, for an estimator whose builder has an exact variant (V-trace: ``Builder.exact``),

* ``exact finish``: that variant, which dispatch launches only for scalars the key's
  builder does not serve (V-trace's finish from the core's ``D[t+1]``, one more scan
  pair, against ``built``'s division).

A variant whose outputs differ from ``built``'s is reported and not timed. Rounds take
turns (rl-triton and every variant per round, in a rotating order) and each gets the
median of its rounds, so drift of the GPU's clocks moves them alike.

    python benchmarks/switches.py --output benchmarks/results/h200   # CUDA, rl-triton installed
    TRITON_INTERPRET=1 python benchmarks/switches.py --smoke --output /tmp/s   # CPU check
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from peer_adapters import PeerUnavailable, rl_triton_adapter, rl_triton_version  # noqa: E402
from peers import as_users_pass  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.dispatch.lookup import validated  # noqa: E402
from rltriton_tune.estimators import prepare_call  # noqa: E402
from rltriton_tune.kernels import launch  # noqa: E402
from rltriton_tune.kernels import strategies as kernel_strategies  # noqa: E402
from rltriton_tune.kernels.builders import BUILDERS  # noqa: E402
from rltriton_tune.kernels.flat import rl_triton_params  # noqa: E402
from rltriton_tune.problems import random_inputs  # noqa: E402
from rltriton_tune.tune.measure import copies_needed, time_cpu, time_cuda  # noqa: E402

#: Variant name -> the switches it sets (the others keep their defaults).
VARIANTS: dict[str, dict[str, bool]] = {
    "built": {},
    "hints off": {"ALIGN_HINTS": False},
    "runs off": {"FLIP_RUNS": False},
    "descending": {"DESCEND_ALWAYS": True},
    "descending, hints off": {"DESCEND_ALWAYS": True, "ALIGN_HINTS": False},
}
#: Variant name -> the config parameters it sets on rl-triton's config (the variant runs
#: only where the flat kernel takes the config: ``TWO_BLOCKS`` needs 8 warps or more).
PARAM_VARIANTS: dict[str, dict[str, int]] = {
    "two blocks": {"TWO_BLOCKS": 1},
}
#: The variant that launches the builder's exact variant (``Builder.exact``).
EXACT = "exact finish"
#: Small env-major cells where backward estimators trail rl-triton at its own config,
#: and a forward estimator that does not, as the control; then V-trace rows that fill
#: part of their span at rl-triton's 16-warp config, where the registers a thread decide
#: how many programs share an SM (the division finish against the ``exact finish``; the
#: register cap, ``two blocks``, which pays at 4096 steps a row).
CELLS = ("gae|none|float32|env|N=333|T=150", "gae|none|float32|env|N=1000|T=200",
         "gae|none|float32|env|N=777|T=77", "gae|last_value|float32|env|N=600|T=100",
         "discounted_returns|none|float32|env|N=333|T=150",
         "vtrace|none|float32|env|N=333|T=150",
         "eligibility_traces|none|float32|env|N=333|T=150",
         "vtrace|none|float32|env|N=2457|T=1229", "vtrace|last_value|float32|env|N=4745|T=1047",
         "vtrace|none|float32|env|N=11077|T=2799")
SMOKE_CELLS = ("gae|none|float32|env|N=4|T=6", "eligibility_traces|none|float32|env|N=3|T=5",
               "vtrace|last_value|float32|env|N=2|T=1000")
PEER = "rl_triton"


@contextlib.contextmanager
def switched(settings: dict[str, bool]) -> Iterator[None]:
    """The switches of ``launch`` set as ``settings`` says, restored on the way out."""
    saved = {name: getattr(launch, name) for name in settings}
    try:
        for name, value in settings.items():
            setattr(launch, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(launch, name, value)


def _timer(device: torch.device, budget_s: float):
    if device.type == "cuda":
        return lambda fn, calls: time_cuda(fn, calls, device, budget_s, host=False).device_us
    return lambda fn, calls: time_cpu(fn, calls[0], budget_s).device_us


def measure(key: ProblemKey, device: torch.device, rounds: int, budget_s: float
            ) -> dict[str, Any]:
    """One row: rl-triton and every variant at rl-triton's config, on the same inputs."""
    copies = copies_needed(key, device)
    base = as_users_pass(random_inputs(key, device, seed=0, on_device=device.type == "cuda"))
    inputs = [base] + [{k: v.clone() if isinstance(v, torch.Tensor) else v
                        for k, v in base.items()} for _ in range(copies - 1)]
    calls = [prepare_call(key.algorithm, **kw) for kw in inputs]
    flat = kernel_strategies()["flat"]
    params = flat.validate(key, rl_triton_params(key.t, key.algorithm))
    row: dict[str, Any] = {"cell": key.as_text(), "params": params, "copies": copies,
                           "device_us": {}, "errors": {}}
    timed: dict[str, tuple[Any, list[Any]]] = {}
    try:
        adapter = rl_triton_adapter(key.algorithm, device, key.dtype, key.time_major)
        timed[PEER] = (adapter.run, [adapter.prepare(kw) for kw in inputs])
    except PeerUnavailable as exc:
        row["errors"][PEER] = str(exc)
    reference = None
    builder = BUILDERS[key.algorithm]
    variants = [*((name, settings, params, builder) for name, settings in VARIANTS.items()),
                *((name, {}, {**params, **extra}, builder)
                  for name, extra in PARAM_VARIANTS.items()
                  if validated(flat, key, {**params, **extra}) is not None)]
    if builder.exact is not None:
        variants.append((EXACT, {}, params, builder.exact))
    for name, settings, config, built_by in variants:
        try:
            with switched(settings):
                # A fresh launcher: the strategy's cache holds one built with the defaults.
                launcher = flat._launcher(key, flat.validate(key, config), built_by)
            outputs = launcher(calls[0])
        except Exception as exc:  # noqa: BLE001 - a variant that fails is a recorded result
            row["errors"][name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            continue
        if reference is None:
            reference = outputs
        elif not all(torch.allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
                     for a, b in zip(outputs, reference, strict=True)):
            row["errors"][name] = "outputs differ from the built kernel's"
            continue
        timed[name] = (launcher, calls)
    time = _timer(device, budget_s)
    samples: dict[str, list[float]] = {name: [] for name in timed}
    order = list(timed)
    for r in range(rounds):
        for name in order[r % len(order):] + order[:r % len(order)]:
            samples[name].append(time(*timed[name]))
    row["device_us"] = {name: statistics.median(values) for name, values in samples.items()}
    return row


def report(rows: list[dict[str, Any]]) -> str:
    """A table: each variant's device time, and rl-triton's time over it (above 1: the
    variant is faster)."""
    names = [n for n in (PEER, *VARIANTS, *PARAM_VARIANTS, EXACT)
             if any(n in r["device_us"] for r in rows)]
    lines = ["| cell | " + " | ".join(names) + " |",
             "|---|" + "---:|" * len(names)]
    for r in rows:
        us = r["device_us"]
        cells = []
        for n in names:
            if n not in us:
                cells.append("-")
            elif n != PEER and PEER in us:
                cells.append(f"{us[n]:.2f} ({us[PEER] / us[n]:.2f}x)")
            else:
                cells.append(f"{us[n]:.2f}")
        cell = r["cell"].replace("|", "\\|")  # key pipes inside a table cell
        lines.append(f"| {cell} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cells", help="comma list of problem keys (default: the built-in list)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--budget", type=float, default=0.1, help="timing seconds per measurement")
    p.add_argument("--output", default="switches-results", help="folder for switches.json")
    p.add_argument("--smoke", action="store_true", help="CPU check of the code path, seconds")
    args = p.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    cells = SMOKE_CELLS if args.smoke else tuple(args.cells.split(",") if args.cells else CELLS)
    rounds, budget = (1, 0.01) if args.smoke else (args.rounds, args.budget)
    rows = []
    for text in cells:
        row = measure(ProblemKey.from_text(text.strip()), device, rounds, budget)
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("cell", "device_us", "errors")}), flush=True)
    import triton

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "triton": triton.__version__,
            "rl_triton": rl_triton_version(), "date": datetime.date.today().isoformat()}
    (out / "switches.json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    print(report(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
