"""Fake transformers: GenerationMixin.generate only."""
from .generation.utils import GenerationMixin  # noqa: F401
