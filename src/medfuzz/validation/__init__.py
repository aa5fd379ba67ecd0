"""Known-truth validation: run medfuzz's real pipeline on planted models and compare every statistic with the
value computed independently from the planted rule (``medfuzz validate``; docs/validation.md)."""

from medfuzz.validation.checks import Check, Size, format_table

__all__ = ["Check", "Size", "format_table"]
