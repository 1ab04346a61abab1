"""``python -m polykernel``: the same as the ``polykernel`` command."""

import sys

from .cli.main import main

sys.exit(main())
