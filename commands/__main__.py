"""`python -m quotaledger ...` runs the CLI (tests that spawn real processes use it)."""

from quotaledger.client.lean import main

main()
