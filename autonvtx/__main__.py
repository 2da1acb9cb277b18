"""`python -m autonvtx`: the same as the `autonvtx` command."""

from __future__ import annotations

import sys

from autonvtx.cli import main

sys.exit(main())
