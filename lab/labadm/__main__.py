"""`python -m lab.labadm`: the same as the `labadm` console script."""

from lab.labadm.cli import main

main()
