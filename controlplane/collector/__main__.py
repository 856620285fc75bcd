"""`python -m controlplane.collector`: see `server.py`."""

import sys

from .server import main

sys.exit(main())
