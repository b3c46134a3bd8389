"""`python -m schedlab` is the `schedlab` command."""

from schedlab.app.cli import entry

entry(prog_name="schedlab")
