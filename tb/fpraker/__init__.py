"""Testbenches of the FPRaker units."""
