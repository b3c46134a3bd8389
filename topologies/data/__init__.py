"""Bundled topology files (presets); see README.md for sources and licenses."""
