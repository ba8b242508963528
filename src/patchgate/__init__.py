"""patchgate: an accuracy-guarded performance-regression gate for LLM inference patches."""

__version__ = "0.3.0"
