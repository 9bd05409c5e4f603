"""``python -m cpa ...`` is ``cpa ...``."""

import sys

from cpa.cli import main

sys.exit(main())
