"""Baseline testbenches: the bit-parallel bf16 PE and tile, FAST's 16-MAC designs."""
