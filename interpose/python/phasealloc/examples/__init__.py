"""Runnable examples: python -m phasealloc.examples.<name>."""
