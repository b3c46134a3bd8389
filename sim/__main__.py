"""`python -m sim` is the `schedlab` command."""

from sim.app.cli import main

main(prog_name="schedlab")
