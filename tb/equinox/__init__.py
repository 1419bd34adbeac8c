"""Equinox testbenches."""
