"""``python -m polykernel.cli``: the same as the ``polykernel`` command."""

import sys

from .main import main

sys.exit(main())
