"""``rltriton-tune doctor``: versions, device, fingerprint, profiles, sample decisions."""

from __future__ import annotations

import json
import os
import platform
from typing import Any

from rltriton_tune.algorithms import ESTIMATOR_NAMES
from rltriton_tune.cli.args import DEFAULT_ACTIONS, resolve_device
from rltriton_tune.cli.output import cell, params_text

#: Version sets of the entries listed one per line (the most common first).
SOFTWARE_SETS_SHOWN = 5


def cmd_doctor(args) -> int:
    import torch

    from rltriton_tune.dispatch import explain
    from rltriton_tune.dispatch.registry import triton_ok
    from rltriton_tune.tuning_db import fingerprint_id, user_dir
    from rltriton_tune.tuning_db.siblings import serving_profiles

    device = resolve_device(None)
    from rltriton_tune.dispatch.devices import device_fingerprint

    fp = device_fingerprint(device)
    try:
        import triton

        triton_text = triton.__version__
    except Exception as exc:  # noqa: BLE001
        triton_text = f"not importable ({type(exc).__name__})"
    print(f"python        {platform.python_version()}")
    print(f"torch         {torch.__version__}")
    if not triton_ok():
        kernels = "kernels not usable"
    elif device.type == "cuda":
        kernels = "kernels usable"
    else:
        kernels = "kernels need a CUDA GPU; none here, so the torch fallback runs"
    print(f"triton        {triton_text} ({kernels})")
    if triton_ok():
        from rltriton_tune.kernels.native_launch import describe

        print(f"launch        {describe()}")
    print(f"device        {device}")
    if device.type == "cuda":
        cap = torch.cuda.get_device_capability(device)
        print(f"gpu           {torch.cuda.get_device_name(device)}, capability {cap[0]}.{cap[1]}")
    print(f"fingerprint   {fingerprint_id(fp)}")
    print(f"              {json.dumps(fp, sort_keys=True)}")
    folder = user_dir()
    where = ("" if folder.is_dir() else
             " (does not exist yet: tune and import create it)" if not os.path.lexists(folder)
             else " (not a folder: tune and import cannot write there; point "
                  "RLTRITON_TUNE_DB at a folder)")
    print(f"user profiles {cell(str(folder), 300)}{where}")
    profiles = serving_profiles(fp)
    print(f"profile files ({len(profiles.reports)}):")
    for report in profiles.reports:
        print(f"  [{'used' if report.used else 'not used'}] {cell(str(report.path), 300)}: "
              f"{cell(report.reason, 300)}")
    if not profiles.reports:
        print("  none")
    borrowed = len(profiles.sibling_keys)
    print(f"entries for this device: {len(profiles.entries)}"
          + (f" ({borrowed} from a sibling GPU's profile; `rltriton-tune tune --refresh` "
             "measures them on this GPU)" if borrowed else ""))
    for line in _skipped_report(profiles, device):
        print(line)
    for line in _software_report(profiles):
        print(line)
    print("sample decisions (N=4096, T=128, float32, env-major; GAE also with last_value):")
    samples = [(alg, None) for alg in ESTIMATOR_NAMES] + [("gae", "last_value")]
    for alg, flags in samples:
        d = explain(alg, 4096, 128, A=DEFAULT_ACTIONS if alg == "retrace" else 0, flags=flags,
                    device=device)
        name = alg if flags is None else f"{alg}+{flags}"
        print(f"  {name:20s} {d.strategy}({cell(params_text(d.params), 160)})  {d.origin}: "
              f"{cell(d.detail, 160)}")
    return 0


def _software_report(profiles: Any) -> list[str]:
    """Which torch/Triton versions the entries were measured with, against this process's."""
    from collections import Counter

    from rltriton_tune.tuning_db.fingerprint import software_versions

    here = software_versions()
    counts = Counter(tuple(sorted(e.software.items())) for e in profiles.entries.values())
    lines = [f"software      torch {here['torch']}, triton {here['triton']} in this process"]
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    for versions, n in ranked[:SOFTWARE_SETS_SHOWN]:
        measured = dict(versions)
        # The versions are read from the profile: bounded and printable (see cell).
        text = cell(", ".join(f"{k} {v}" for k, v in versions) or "versions not recorded", 80)
        differs = cell(", ".join(k for k, v in measured.items() if here.get(k) != v), 80)
        note = (f"; differs in {differs}: used as measured, "
                "`rltriton-tune tune --refresh` re-times them here") if differs else ""
        lines.append(f"              {n} entries measured with {text}{note}")
    if len(ranked) > SOFTWARE_SETS_SHOWN:
        rest = sum(n for _, n in ranked[SOFTWARE_SETS_SHOWN:])
        lines.append(f"              {rest} entries measured with "
                     f"{len(ranked) - SOFTWARE_SETS_SHOWN} other version sets")
    return lines


def _skipped_report(profiles: Any, device: Any, shown: int = 5) -> list[str]:
    """Lines naming the entries dispatch skips on ``device`` (a strategy that cannot run
    here, a config its strategy refuses), the first ``shown`` of them with the reason."""
    from rltriton_tune.dispatch.decide import usable_strategies
    from rltriton_tune.dispatch.lookup import unusable_entries, unusable_off_grid

    usable = usable_strategies(device)[0]
    lines: list[str] = []
    for found, head in ((unusable_entries(profiles, usable),
                         "cannot serve a call here (dispatch skips them)"),
                        (unusable_off_grid(profiles, usable),
                         "record an off-grid config that cannot serve here (calls of other "
                         "shapes with partly filled spans of steps take their own config)")):
        if not found:
            continue
        lines.append(f"  of which {len(found)} {head}:")
        lines += [f"    {cell(text, 120)}: {cell(why, 160)}"
                  for text, why in list(found.items())[:shown]]
        if len(found) > shown:
            lines.append(f"    ... and {len(found) - shown} more")
    return lines
