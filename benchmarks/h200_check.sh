#!/usr/bin/env bash
# One device session: environment, copy bandwidth, then every `gpu`-marked test.
# Usage on the device machine (repo root, wheels carried in .whl/): bash benchmarks/h200_check.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh" || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/env.txt"
python3 - <<'PY' | tee -a "$OUT/env.txt"
import torch, triton
print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(),
      torch.cuda.get_device_capability(), torch.cuda.get_device_properties(0).multi_processor_count)
x = torch.empty(2**30 // 4 * 2, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = torch.cuda.Event(True), torch.cuda.Event(True); torch.cuda.synchronize(); s.record()
for _ in range(20): y.copy_(x)
e.record(); torch.cuda.synchronize(); ms = s.elapsed_time(e) / 20
print(f"copy bandwidth {2 * x.numel() * 4 / ms / 1e6:.0f} GB/s (read+write, 2 GiB buffers)")
PY
timeout "${GPU_TEST_TIMEOUT:-420}" python3 -m pytest -m gpu -v --durations=25 -p no:cacheprovider -p no:randomly --timeout 300 -n "${GPU_WORKERS:-16}" ${GPU_TESTS:-tests} 2>&1 | grep -v "PytestBenchmarkWarning\|warner(" | tee "$OUT/gpu_tests.log" | grep -E "FAILED|ERROR|passed|failed" | tail -40
