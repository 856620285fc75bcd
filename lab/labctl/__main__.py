"""`python -m lab.labctl`: the same as the `labctl` console script."""

import sys

from lab.labctl.cli import main

sys.exit(main())
