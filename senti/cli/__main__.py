"""`python -m senti.cli`: the same command line as the `senti` script."""

from senti.cli import main

main()
