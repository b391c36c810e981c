"""``python -m jev_shared.cli``: the ``jev`` command."""

import sys

from . import main

sys.exit(main())
