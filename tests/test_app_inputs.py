"""Typed text is never overwritten by a rerun (AppTest): an ordinary rerun does not send an ``in_*`` widget's
value back to the browser as a new value (``set_value``: the browser then replaces what the visitor typed while
the run was under way — "The template text is empty." after a correct paste under load), and a value still
survives leaving the page and coming back (then it is sent, as the widget is drawn anew)."""

from __future__ import annotations

from .test_app_helpers import page, start


def test_a_rerun_does_not_push_typed_text_back():
    at = page(start(), "explain")
    at.text_area(key="in_output").input("typed by the visitor").run()
    assert at.text_area(key="in_output").proto.set_value is False
    at.run()
    assert at.text_area(key="in_output").proto.set_value is False
    assert at.text_area(key="in_output").value == "typed by the visitor"


def test_a_value_survives_another_page():
    at = page(start(), "explain")
    at.text_area(key="in_output").input("kept across pages").run()
    page(at, "overview")
    page(at, "explain")
    assert at.text_area(key="in_output").value == "kept across pages"
