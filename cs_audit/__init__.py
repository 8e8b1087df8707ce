"""cs-audit: audit env-var debug switches, trace helpers, dumps and log lines in LLM-serving engines."""

__version__ = "0.1.0"
