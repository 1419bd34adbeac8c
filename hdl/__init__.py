"""Amaranth components for every trainfab unit.

Each component is built from the same frozen configuration object as its golden model (imported
from :mod:`golden` for the configuration classes only; the arithmetic is never borrowed from the
golden model).
"""
