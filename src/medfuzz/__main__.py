"""``python -m medfuzz``: the ``medfuzz`` command (``medfuzz.cli``), e.g. ``python -m medfuzz validate``."""

import sys

from medfuzz.cli import main

sys.exit(main())
