from .entrypoints.llm import LLM  # noqa: F401
