"""`python -m sim` is the `schedlab` command."""

from sim.cli import main

main(prog_name="schedlab")
