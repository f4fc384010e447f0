"""Templates that jinja2 parses but whose generated Python code Python's compile() refuses.

Found by a differential run of session 7's code generator against the previous one (cede892): the error escaped
``ChatTemplate.render`` as Python's own ``SyntaxError`` / ``IndentationError``, whose "(<template>, line N)"
names a line of the generated source (12 before the generator change, 11 after for the macro below), not of
the template. ``render`` documents :class:`core.errors.TemplateSyntaxError` for errors found at compile time.
"""
import pytest

from core.errors import TemplateSyntaxError
from core.jinja.template import ChatTemplate


@pytest.mark.parametrize("source, said", [
    ("{% macro m(a, a) %}{% endmacro %}{{ m(1) }}", "duplicate argument"),
    ("{% if t %}" * 100 + "x" + "{% endif %}" * 100, "too many levels of indentation"),
], ids=["macro-argument-twice", "ifs-nested-100-deep"])
def test_python_refusing_the_generated_code_is_a_template_syntax_error(source, said):
    t = ChatTemplate(source, "refused.jinja")  # parses: jinja2 finds nothing wrong
    with pytest.raises(TemplateSyntaxError) as e:
        t.render({"t": True})
    assert said in str(e.value)
    assert e.value.lineno is None
    assert "line" not in str(e.value)  # no line number of the generated Python source
