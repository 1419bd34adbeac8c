"""Baseline components: the bit-parallel bf16 PE and tile, FAST's 16-MAC designs."""

from .bf16_pe import AlignReduce, BF16PE, Products
from .bf16_tile import Bf16Tile
from .mac16 import FPMacLane, MAC16

__all__ = ["Products", "AlignReduce", "BF16PE", "Bf16Tile", "FPMacLane", "MAC16"]
