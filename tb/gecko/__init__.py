"""Gecko testbenches: compressor, decompressor and loopback against ``golden.gecko.codec``."""
