"""``python -m rltriton_tune.cli``: the ``rltriton-tune`` command."""

import sys

from rltriton_tune.cli import main

sys.exit(main())
