"""Kernel A/B questions, timed on a GPU in one session (``--sections``).

* ``align``: what the alignment hints (``launch.ALIGN_HINTS``, ``scan.true_sizes``)
  buy. For shapes whose contiguous size is a multiple of 2-8 but not of 16, the
  dispatched choice and the rl-triton flat config, each compiled with and without the
  hints, gated against the reference and timed in interleaved rounds.
* ``wide``: whether short rows want more rows per program than the search space's 64
  (``MAX_BLOCK_N``): flat configs up to 512 rows at T = 8 and 32.
* ``action``: whether Retrace's per-action loads want whole action vectors per step
  (``launch.ACTION_TILE_BUDGET`` 2^14 instead of 2^12, so ``BLOCK_A`` = 8 up to
  T = 2048), same A/B method as ``align``.

Writes ``align_probe.json`` and ``align_probe.md`` under ``--output``.

    python benchmarks/align_probe.py --output DIR [--sections align,wide,action]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import torch  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.kernels import launch, strategies  # noqa: E402
from rltriton_tune.kernels.flat import rl_triton_params  # noqa: E402
from rltriton_tune.tune.bench import _dispatched  # noqa: E402
from rltriton_tune.tune.evaluate import Evaluator  # noqa: E402
from rltriton_tune.tune.space import Candidate  # noqa: E402

#: (N, T, layout): contiguous sizes with a power-of-two factor of 2-8 (the bench's held-out
#: shapes among them), and two time-major ones.
ALIGN_SHAPES = [(1500, 1500, "env"), (5000, 300, "env"), (6000, 3000, "env"),
                (300, 1000, "env"), (100, 3000, "env"), (1000, 200, "env"),
                (20000, 100, "env"), (50000, 20, "env"), (200, 700, "env"),
                (2500, 600, "env"), (30000, 60, "env"), (1500, 1500, "time"),
                (20000, 100, "time")]
WIDE_SHAPES = [(32768, 8), (32768, 32), (4096, 8)]
WIDE_ROWS = (32, 64, 128, 256, 512)
#: Rows of 1024+ steps first: there the 2^14 budget loads whole action rows (BLOCK_A = 8
#: instead of 2); at 4096x512 both budgets give BLOCK_A = 8 (a null A/B: the noise level).
ACTION_SHAPES = [(32768, 2048), (6000, 3000), (600, 2500), (4096, 512), (12000, 160),
                 (777, 77)]
#: Kernel variants compared with the shipping kernels: tag -> (``launch`` attribute, value).
VARIANTS = {"no-hints": ("ALIGN_HINTS", False), "action-tile-16k": ("ACTION_TILE_BUDGET", 1 << 14)}


def fresh_strategies() -> dict:
    """Strategy instances with empty launcher caches."""
    return {name: type(s)() for name, s in strategies().items()}


def probe_key(algorithm: str, n: int, t: int, layout: str,
              dtype: str = "float32") -> ProblemKey:
    """Retrace with truncations and 8 actions, as the bench uses; others without flags."""
    retrace = algorithm == "retrace"
    return ProblemKey(algorithm, n, t, dtype, layout, "trunc" if retrace else "none",
                      8 if retrace else 0)


def time_candidates(key: ProblemKey, device: torch.device, cands: list[Candidate],
                    impls: dict, budget_s: float, pool=None) -> list[dict]:
    """Gate ``cands`` against the reference, then time them in interleaved rounds;
    compiled on threads, or in ``pool`` (a ``CompilePool``) when given."""
    # The interpreter is not thread-safe; a pool compiles in its own processes.
    workers = 8 if device.type == "cuda" and pool is None else 1
    evaluator = Evaluator(key, device, impls, workers=workers, time_budget_s=budget_s,
                          pool=pool)
    try:
        outs = evaluator.evaluate(cands)
    finally:
        evaluator.close()
    return [{"key": key.as_text(), "config": o.candidate.label(),
             "device_us": o.timing.device_us if o.ok else None, "error": o.error}
            for o in outs]


def prepare_under(module, attr: str, value, key: ProblemKey, todo: list[tuple]) -> None:
    """Prepare each (strategy, params) of ``todo`` for ``key`` while ``module.attr`` is
    ``value``: launchers (and their Packer's constexprs) are fixed at prepare time, so
    they keep the variant afterwards, while the module gets its value back."""
    saved = getattr(module, attr)
    setattr(module, attr, value)
    try:
        for impl, params in todo:
            impl.prepare(key, params)
    finally:
        setattr(module, attr, saved)


def ab_rows(key: ProblemKey, device: torch.device, budget_s: float, tag: str) -> list[dict]:
    """The dispatched choice and the rl-triton flat config, each as shipped and with the
    ``tag`` variant of ``VARIANTS``, gated and timed together."""
    attr, value = VARIANTS[tag]
    chosen, _ = _dispatched(key, device)
    shipping, variant = fresh_strategies(), fresh_strategies()
    roles = ["dispatched", "rl_triton"]
    base = [chosen, Candidate("flat", rl_triton_params(key.t))]
    if chosen.strategy not in shipping:  # a torch strategy has no kernel variant
        roles, base = roles[1:], base[1:]
    prepare_under(launch, attr, value, key, [(variant[c.strategy], c.params) for c in base])
    suffix = ":" + tag
    impls = {**shipping, **{name + suffix: s for name, s in variant.items()}}
    cands = base + [Candidate(c.strategy + suffix, c.params) for c in base]
    rows = time_candidates(key, device, cands, impls, budget_s)
    for row, role in zip(rows, roles + roles, strict=True):
        row["role"] = role
        row["variant"] = tag if suffix in row["config"] else "shipping"
    return rows


def rows_by_key(rows: list[dict]) -> dict[str, list[dict]]:
    """Probe rows grouped by key text, in first-seen order."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["key"], []).append(r)
    return out


def fastest(rows: list[dict]) -> dict | None:
    """The timed row with the least device time (None if none was timed)."""
    timed = [r for r in rows if r["device_us"]]
    return min(timed, key=lambda r: r["device_us"]) if timed else None


def _variant(row: dict) -> str | None:
    """A/B rows: the row's variant tag (older files record ``hints`` instead)."""
    if "variant" in row:
        return row["variant"]
    if "hints" in row:
        return "shipping" if row["hints"] else "no-hints"
    return None


def wide_rows(key: ProblemKey, device: torch.device, budget_s: float) -> list[dict]:
    impls = fresh_strategies()
    flat = impls["flat"]
    chosen = _dispatched(key, device)[0]
    cands = [chosen] if chosen.strategy in impls else []
    for rows in WIDE_ROWS:
        for warps in (1, 2, 4, 8, 16):
            try:
                cands.append(Candidate("flat", flat.validate(key, {"BLOCK_N": rows,
                                                                   "num_warps": warps})))
            except Exception:  # noqa: BLE001 - outside the strategy's limits
                continue
    out = time_candidates(key, device, cands, impls, budget_s)
    if cands and cands[0] is chosen:
        out[0]["role"] = "dispatched"
    return out


def report(rows: list[dict]) -> str:
    lines = []
    tags = sorted({_variant(r) for r in rows} - {None, "shipping"})
    for tag in tags:
        keys = [k for k in dict.fromkeys(r["key"] for r in rows if _variant(r) == tag)]
        lines += [f"## Shipping kernels against `{tag}` (device us)", "",
                  "| key | dispatched | shipping | variant | variant / shipping | "
                  "rl-triton flat shipping | variant | variant / shipping |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        gains = []
        for key in keys:
            d = {(r["role"], _variant(r)): r for r in rows
                 if r["key"] == key and _variant(r) in ("shipping", tag)}
            cells = [key, d.get(("dispatched", "shipping"), {}).get("config", "-")]
            for role in ("dispatched", "rl_triton"):
                a = d.get((role, "shipping"), {}).get("device_us")
                b = d.get((role, tag), {}).get("device_us")
                ratio = b / a if a and b else None
                if ratio and role == "dispatched":
                    gains.append(ratio)
                cells += [f"{a:.2f}" if a else "-", f"{b:.2f}" if b else "-",
                          f"{ratio:.2f}x" if ratio else "-"]
            lines.append("| " + " | ".join(cells) + " |")
        if gains:
            lines += ["", f"Dispatched choice, geometric mean of variant / shipping time: "
                      f"{statistics.geometric_mean(gains):.2f}x over {len(gains)} keys "
                      f"(min {min(gains):.2f}x, max {max(gains):.2f}x).", ""]
    lines += ["## Rows per program for short rows (flat)", "",
              "| key | dispatched us | best wide config | us |", "|---|---:|---|---:|"]
    for key, rs in rows_by_key([r for r in rows if _variant(r) is None]).items():
        best = fastest([r for r in rs if "role" not in r])
        mine = next((r["device_us"] for r in rs if "role" in r), None)
        lines.append(f"| {key} | {mine or 0:.2f} | {best['config'] if best else '-'} | "
                     f"{best['device_us'] if best else 0:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--algorithms",
                   default="gae,eligibility_traces,vtrace,discounted_returns,retrace")
    p.add_argument("--wide-algorithms", default="gae,vtrace,eligibility_traces")
    p.add_argument("--sections", default="align,wide,action",
                   help="any of align, wide, action")
    p.add_argument("--budget-s", type=float, default=0.03, help="timing seconds per config")
    p.add_argument("--max-seconds", type=float, default=400.0)
    args = p.parse_args(argv)
    sections = set(args.sections.split(","))
    jobs = []
    if "align" in sections:
        jobs += [(partial(ab_rows, tag="no-hints"), probe_key(a, n, t, layout))
                 for a in args.algorithms.split(",") for n, t, layout in ALIGN_SHAPES]
    if "wide" in sections:
        jobs += [(wide_rows, probe_key(a, n, t, "env"))
                 for a in args.wide_algorithms.split(",") for n, t in WIDE_SHAPES]
    if "action" in sections:
        jobs += [(partial(ab_rows, tag="action-tile-16k"), probe_key("retrace", n, t, "env"))
                 for n, t in ACTION_SHAPES]
    return run_jobs("align_probe", jobs, args.output, report, args.budget_s,
                    args.max_seconds)


def run_jobs(name: str, jobs: list, output: Path, report, budget_s: float,
             max_seconds: float) -> int:
    """Run ``(measure, key)`` jobs on the GPU (``measure(key, device, budget_s)`` returns
    rows) until done or ``max_seconds``; ``NAME.json`` is rewritten after every job,
    ``NAME.md`` (``report(rows)``) written at the end."""
    if not torch.cuda.is_available():
        print(f"{name}: error: needs a CUDA GPU", file=sys.stderr)
        return 1
    device = torch.device("cuda")
    deadline = time.monotonic() + max_seconds
    output.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for measure, key in jobs:
        if time.monotonic() > deadline:
            print(f"{name}: stopped by --max-seconds before {key.as_text()}", file=sys.stderr)
            break
        rows += measure(key, device, budget_s)
        (output / f"{name}.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(device), "torch": torch.__version__,
             "triton": __import__("triton").__version__, "rows": rows}, indent=1))
        print(f"{key.as_text()}: done", file=sys.stderr)
    (output / f"{name}.md").write_text(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
