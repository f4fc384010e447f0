"""Differential analysis of chat templates (llama.cpp's auto-parser design).

Public API: :func:`analyze` → :class:`AnalysisReport`, :func:`reapply` (workarounds and overrides again,
no renders), :class:`Comparison`, the result dataclasses (:class:`TemplateAnalysis` …), the workaround
rules (:data:`WORKAROUNDS`) and routing (:func:`detect_route`).
"""

from .analyzer import REFERENCE_MESSAGES, REFERENCE_TOOLS, AnalysisReport, analyze, apply_overrides, reapply
from .result import (
    CallIdPosition,
    Caps,
    ContentAnalysis,
    ContentMode,
    ReasoningAnalysis,
    ReasoningMode,
    TemplateAnalysis,
    ToolArgumentsAnalysis,
    ToolCallIdAnalysis,
    ToolFormat,
    ToolFormatAnalysis,
    ToolFunctionAnalysis,
    ToolsAnalysis,
)
from .routing import Route, detect_route
from .session import Comparison
from .workarounds import WORKAROUNDS, Workaround

__all__ = [
    "AnalysisReport", "CallIdPosition", "Caps", "Comparison", "ContentAnalysis", "ContentMode",
    "REFERENCE_MESSAGES", "REFERENCE_TOOLS", "ReasoningAnalysis", "ReasoningMode", "Route", "TemplateAnalysis",
    "ToolArgumentsAnalysis", "ToolCallIdAnalysis", "ToolFormat", "ToolFormatAnalysis", "ToolFunctionAnalysis",
    "ToolsAnalysis", "WORKAROUNDS", "Workaround", "analyze", "apply_overrides",
    "detect_route", "reapply",
]
