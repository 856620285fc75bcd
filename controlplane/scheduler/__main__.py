"""`python -m controlplane.scheduler`: see `server.py`."""

import sys

from .server import main

sys.exit(main())
