"""Chat Template Explorer engine: learn a chat template's output format by differential analysis.

Data flow (one module per stage):
    templating -> diff -> analysis -> peg -> chat (parser, mapper, stream) -> grammar

Nothing in ``core`` imports Streamlit; the explorer app only reads these results.
"""

__version__ = "0.1.0"
