"""`python -m quotaledger ...` runs the CLI (tests that spawn real processes use it)."""

from quotaledger.entry import main

main()
