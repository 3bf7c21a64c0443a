"""The package's version (one place: the package root and cache keys read it from here)."""

__version__ = "0.1.0"
