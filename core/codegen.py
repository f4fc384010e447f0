"""Literals for generated code: the only way untrusted text (template, variant, file, tool and parameter names,
model outputs, schemas) enters a Python or C++ file we write (``python -m core suite``'s ``test_suite.py``, the
explain reproducers).

Failure model: every function returns pure ASCII, so nothing the reader's editor or compiler treats specially
(line and paragraph separators, bidi controls, NUL, ``\\N{…}`` sequences, a BOM) survives as a raw character.
A Python literal is ``ascii()`` of a ``str`` (never of another type: a non-``str`` raises ``TypeError`` rather
than writing an object's repr). A C++ literal is an ordinary narrow string literal holding the text's UTF-8 bytes,
where every byte other than printable ASCII, and ``"``, ``\\`` and ``?`` (trigraphs), is a three-digit octal
escape (three digits, so a following digit is never read into the escape); a text holding NUL is written as
``std::string(literal, length)`` so it is not cut at the NUL. A Python identifier is made of the name's ASCII
letters and digits (everything else replaced, never escaped into place) and is never a keyword.
"""

from __future__ import annotations

import keyword


def py_str(text: str) -> str:
    """``text`` as a Python string literal (pure ASCII, evaluates to ``text``)."""
    if not isinstance(text, str):
        raise TypeError(f"py_str takes a str, got {type(text).__name__}")
    return ascii(text)


def py_identifier(text: str, *, prefix: str = "x_", max_len: int = 80) -> str:
    """An ASCII Python identifier made from ``text``: letters and digits kept, everything else ``_``, lower case,
    ``prefix`` in front when the result would start with a digit, be empty or be a keyword."""
    out = "".join(c if c.isascii() and c.isalnum() else "_" for c in text).lower()[:max_len]
    if not out or out[0].isdigit() or keyword.iskeyword(out) or keyword.issoftkeyword(out):
        out = (prefix + out)[:max_len]
    return out


def cpp_str(text: str) -> str:
    """``text`` as a C++ narrow string literal of its UTF-8 bytes (pure ASCII)."""
    if not isinstance(text, str):
        raise TypeError(f"cpp_str takes a str, got {type(text).__name__}")
    out = ['"']
    for b in text.encode("utf-8", "surrogatepass"):
        c = chr(b)
        out.append(c if 0x20 <= b < 0x7F and c not in '"\\?' else f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def cpp_string(text: str) -> str:
    """``text`` as a C++ expression of type-compatible ``std::string``: the :func:`cpp_str` literal, or
    ``std::string(LITERAL, LENGTH)`` when the text holds a NUL (a plain literal would end there)."""
    lit = cpp_str(text)
    return f"std::string({lit}, {len(text.encode('utf-8', 'surrogatepass'))})" if "\0" in text else lit

