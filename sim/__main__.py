"""`python -m sim` is the `schedlab` command."""

from sim.app.cli import entry

entry(prog_name="schedlab")
