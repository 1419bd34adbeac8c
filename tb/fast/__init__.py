"""FAST testbenches."""
