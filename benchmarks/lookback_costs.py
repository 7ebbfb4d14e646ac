"""Where does a look-back program's time go? (issue 3: GAE 16x32768 at 8.3 us, target 8)

The shipped look-back kernel is timed next to copies of it with stages cut out, built by
editing the source of ``rltriton_tune/kernels/lookback.py`` into temporary modules:

* ``shipped``: as the package runs it;
* ``no-wait``: no look-back (the carry is zero): no polls, no aggregate loads;
* ``no-publish``: ``no-wait`` without publishing the aggregate either (no store, no
  barrier, no release): the local scan with its loads and stores only;
* ``no-counter``: ``no-publish`` without reading the launch counter;
* ``baseline`` (with ``--baseline FILE``): another version of the module, such as the
  one a change replaces, timed in the same run (and checked like the shipped one).

The cut copies compute wrong numbers on purpose: they are timed, never checked (the
shipped kernel is checked against the reference first). Each cut's time is an upper
bound on what that stage costs on the critical path. Writes ``lookback_costs.json``
and ``.md`` under ``--output``.

    python benchmarks/lookback_costs.py --output DIR [--keys ...] [--baseline FILE]
    python benchmarks/lookback_costs.py --check   # build every variant, no GPU needed
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import torch  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.kernels import lookback  # noqa: E402

KEYS = ["gae|none|float32|env|N=16|T=32768", "gae|none|float32|env|N=3|T=50000",
        "eligibility_traces|none|float32|env|N=16|T=32768"]
CONFIGS = [{"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 1},
           {"BLOCK_N": 1, "BLOCK_T": 2048, "num_warps": 1},
           {"BLOCK_N": 2, "BLOCK_T": 1024, "num_warps": 2},
           {"BLOCK_N": 1, "BLOCK_T": 2048, "num_warps": 4}]

_WAIT = ("    carry = _look_back(WORDS, plane, r, m, k, base, N, BIG, WINDOW, MAX_SPINS)\n",
         "    carry = zero\n")
_PUBLISH = ('    tl.atomic_xchg(WORDS + at, _pack(tag, value), mask=m, sem="relaxed")\n',
            "    pass\n")
_COUNTER = ("        epoch = tl.load(STATE, volatile=True) // programs\n",
            "        epoch = 0\n")
#: Variant -> source edits (old text, new text), each of which must match exactly once.
EDITS: dict[str, list[tuple[str, str]]] = {
    "no-wait": [_WAIT],
    "no-publish": [_WAIT, _PUBLISH],
    "no-counter": [_WAIT, _PUBLISH, _COUNTER],
}


def _module_from(path: Path, text: str) -> ModuleType:
    """Import ``text`` as a module from ``path`` (Triton's ``inspect`` needs a real file)."""
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"lookback_costs_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def variant_modules(folder: Path, baseline: Path | None = None) -> dict[str, ModuleType]:
    """The shipped module, one edited copy per ``EDITS`` entry and the ``baseline``
    file's module when given."""
    source = Path(lookback.__file__).read_text()
    out: dict[str, ModuleType] = {"shipped": lookback}
    for name, edits in EDITS.items():
        text = source
        for old, new in edits:
            if text.count(old) != 1:
                raise RuntimeError(f"{name}: the edit target is not in lookback.py once: "
                                   f"{old.strip()!r}")
            text = text.replace(old, new)
        out[name] = _module_from(folder / f"lookback_{name.replace('-', '_')}.py", text)
    if baseline is not None:
        out["baseline"] = _module_from(folder / "lookback_baseline.py", baseline.read_text())
    return out


def measure(modules: dict[str, ModuleType], keys: list[str], configs: list[dict]) -> list[dict]:
    from rltriton_tune.tune.gate import Gate
    from rltriton_tune.tune.measure import make_call, time_cuda

    device = torch.device("cuda")
    rows = []
    for key_text in keys:
        key = ProblemKey.from_text(key_text)
        calls = [make_call(key, device, seed=s) for s in range(4)]
        gate = Gate(key, device)  # keeps the key's reference results for every check
        for params in configs:
            for checked in ("shipped", "baseline"):  # real kernels: checked (raises)
                if checked in modules:
                    gate.check(modules[checked].LookbackStrategy(), params)
            for name, module in modules.items():
                launcher = module.LookbackStrategy().prepare(key, params)
                timing = time_cuda(launcher, calls, device)
                rows.append({"key": key_text, "params": params, "variant": name,
                             "device_us": timing.device_us})
                print(f"{key_text} {params} {name}: {timing.device_us:.2f} us", flush=True)
    return rows


def markdown(rows: list[dict]) -> str:
    names = ["shipped", *EDITS, "baseline"]
    lines = ["# Look-back stage costs", "", "Device time in µs (CUDA-graph replays); the cut "
             "variants compute wrong numbers and are timed only.", "",
             "| key | config | " + " | ".join(names) + " |",
             "|---|---|" + "---:|" * len(names)]
    cells: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        config = ", ".join(f"{k}={v}" for k, v in r["params"].items())
        cells.setdefault((r["key"], config), {})[r["variant"]] = r["device_us"]
    for (key, config), times in cells.items():
        lines.append(f"| {key} | {config} | " +
                     " | ".join(f"{times[n]:.2f}" if n in times else "-" for n in names) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path)
    p.add_argument("--keys", default=",".join(KEYS), help="key texts, comma-separated")
    p.add_argument("--baseline", type=Path, metavar="FILE",
                   help="another lookback.py to time (and check) beside the shipped one")
    p.add_argument("--check", action="store_true",
                   help="only build the variant modules (no GPU needed)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        modules = variant_modules(Path(tmp), args.baseline)
        if args.check:
            print("lookback_costs: variants " + ", ".join(modules))
            return 0
        if args.output is None or not torch.cuda.is_available():
            print("lookback_costs: needs --output and a CUDA GPU", file=sys.stderr)
            return 2
        rows = measure(modules, args.keys.split(","), CONFIGS)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "lookback_costs.json").write_text(json.dumps(rows, indent=1))
    (args.output / "lookback_costs.md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
