"""``python -m cosim.cli``: the ``cosim`` command."""

import sys

from cosim.cli import main

sys.exit(main())
