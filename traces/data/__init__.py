"""Bundled trace files."""
