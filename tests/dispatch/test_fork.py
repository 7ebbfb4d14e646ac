"""A forked child never hangs on a lock a parent thread held at the fork."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

# The defect's reproduction: one thread keeps making calls on new shapes (each a memo miss
# under the dispatch lock) while the main thread forks; each child makes a call on a new
# shape of its own. A child that waited on a lock held at the fork would be killed by its
# alarm and counted.
SCRIPT = textwrap.dedent("""
    import os, signal, sys, threading, warnings
    import torch
    import rltriton_tune as R
    warnings.simplefilter("ignore")
    z = lambda n, t: (torch.randn(n, t), torch.randn(n, t), torch.zeros(n, t))
    R.compute_gae(*z(8, 16))
    def churn(n=17):
        while True:
            n += 1
            R.compute_gae(*z(8, n))
    threading.Thread(target=churn, daemon=True).start()
    hung = 0
    forks = int(sys.argv[1])
    for i in range(forks):
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)
            # torch.randn is not used in the child: torch's own CPU generator lock may be
            # held by the churning thread at the fork (a torch matter, not this package's)
            x = torch.full((3, 1000 + i), 0.5)
            R.compute_gae(x, x, torch.zeros_like(x))
            R.explain("vtrace", 5, 100 + i, device="cpu")
            os._exit(0)
        status = os.waitpid(pid, 0)[1]
        hung += os.WIFSIGNALED(status) or os.WEXITSTATUS(status) != 0
    print(hung, flush=True)
    os._exit(0)  # the churning thread is still inside torch: skip interpreter teardown
""")


@pytest.mark.parametrize("online", ["0", "1"])
def test_forked_children_never_hang(online, tmp_path):
    env = {**os.environ, "RLTRITON_TUNE_ONLINE": online, "RLTRITON_TUNE_DB": str(tmp_path),
           "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, "12"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "0"
