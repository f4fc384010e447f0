"""A reproducer to paste into a bug report: the case as a ``reference/cases.jsonl`` line, a pytest test for this
project, and a ``peg_tester`` snippet in the shape of llama.cpp's ``tests/test-chat.cpp``.

With an expected message (``--expect FILE`` on the CLI, the box on the Explain page) the pytest test asserts that
message and is marked ``xfail(strict=True)`` with the cause: it fails until the bug is fixed, then its strict
xfail turns the fix into a signal to remove the mark. Without one the test is a characterisation test that pins
the message as parsed now, and says so. Case ids are unique (:func:`case_id`: a hash of every input the reproducer is
written from). Input text (names, schemas, outputs) only ever appears inside string literals of the generated code,
never as code."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ..chat.roundtrip import compare_messages
from ..codegen import cpp_string, py_identifier, py_str
from ..errors import ExpectedMessageError
from ..escapes import escape_char, is_invisible
from .llama_templates import llama_cpp_file

REASONING_FORMATS = ("NONE", "AUTO", "DEEPSEEK", "DEEPSEEK_LEGACY")
"""llama.cpp's ``COMMON_REASONING_FORMAT_*`` names the snippet may write (anything else is written as AUTO)."""
TOOL_CHOICES = ("AUTO", "REQUIRED", "NONE")
"""llama.cpp's ``COMMON_CHAT_TOOL_CHOICE_*`` names."""
CONTINUATIONS = ("NONE", "AUTO", "REASONING", "CONTENT")
"""llama.cpp's ``COMMON_CHAT_CONTINUATION_*`` names."""


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def check_expected(value: Any, source: str = "the expected message") -> dict[str, Any]:
    """``value`` when it is an OpenAI assistant message the reproducers can write and assert — an object whose
    ``content`` / ``reasoning_content`` are text or null and whose ``tool_calls`` is a list of objects with a
    ``function`` object (``name`` text, ``arguments`` JSON text or an object, ``id`` text or null) — else
    :class:`ExpectedMessageError` naming the first bad field (``source``: where the message came from). The
    reproducers index these fields, so a message of another shape would fail inside them instead."""
    if not isinstance(value, dict):
        raise ExpectedMessageError(source, "", f"expected a JSON object (an OpenAI message), got {_kind(value)}")
    for key in ("role", "content", "reasoning_content"):
        if value.get(key) is not None and not isinstance(value[key], str):
            raise ExpectedMessageError(source, key, f"expected text or null, got {_kind(value[key])}")
    calls = value.get("tool_calls")
    if calls is None:
        return value
    if not isinstance(calls, list):
        raise ExpectedMessageError(source, "tool_calls", f"expected a list of calls, got {_kind(calls)}")
    for n, call in enumerate(calls):
        where = f"tool_calls[{n}]"
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            got = _kind(call.get("function")) if isinstance(call, dict) else _kind(call)
            raise ExpectedMessageError(source, where, f"expected an object with a \"function\" object, got {got}")
        fn = call["function"]
        if not isinstance(fn.get("name"), str):
            raise ExpectedMessageError(source, where + ".function.name", f"expected text, got {_kind(fn.get('name'))}")
        if not isinstance(fn.get("arguments", ""), (str, dict)):
            raise ExpectedMessageError(source, where + ".function.arguments",
                                       f"expected JSON text or an object, got {_kind(fn['arguments'])}")
        if isinstance(fn.get("arguments"), str):
            try:    # the comparison with the parse reads it as JSON
                json.loads(fn["arguments"])
            except RecursionError:
                raise ExpectedMessageError(source, where + ".function.arguments", "JSON nested too deeply") from None
            except ValueError:
                pass    # text that is no JSON: compared as such
        if call.get("id") is not None and not isinstance(call["id"], str):
            raise ExpectedMessageError(source, where + ".id", f"expected text or null, got {_kind(call['id'])}")
    return value


def case_id(ex: Any, expect: dict[str, Any] | None = None, source: str | None = None) -> str:
    """``explain-`` and 12 hex digits of a hash of the template name, the request and the output — and of every
    other input that changes the reproducer written from them, each only when it is given, so an explanation without
    them keeps its id: the settings (fidelity ``improved``, a repair alone, overrides, workarounds off), the
    request's key order when it is not sorted (a template renders the tools' parameters in their order), the
    expected message and the template's text. So the reproducer of a failing parse, the one written with its fix
    applied, the ``--expect`` reproducer and the characterisation test of the same output do not share an id (nor
    a test function name, which in one file would shadow the other)."""
    h = hashlib.sha256()
    parts = [ex.template, json.dumps(ex.request, sort_keys=True, ensure_ascii=False), ex.output]
    settings = _settings(ex)
    if settings or ex.fidelity != "llama.cpp":
        parts.append(json.dumps({"fidelity": str(ex.fidelity), **settings}, sort_keys=True, ensure_ascii=False))
    # (the request's own fields come in the class's order; the order inside them is the user's)
    as_given = json.dumps(dict(sorted(ex.request.items())), ensure_ascii=False)
    if as_given != parts[1]:
        parts.append("request: " + as_given)
    if expect is not None:
        parts.append("expect: " + json.dumps(expect, ensure_ascii=False))
    if source is not None:
        parts.append("source: " + source)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return "explain-" + h.hexdigest()[:12]


def case_line(ex: Any, case_id_: str | None = None, expect: dict[str, Any] | None = None) -> str:
    """The explanation's case as one JSON line of ``reference/cases.jsonl``; ``expect`` = the expected message
    (without one: the message the current parser gives — edit it to the message you expected)."""
    row = {"id": case_id_ or case_id(ex, expect), "template": ex.template, **ex.request, "input": ex.output,
           "is_partial": False, "expect": expect if expect is not None else ex.message}
    return _escape_format_chars(json.dumps(row, ensure_ascii=False))


def _escape_format_chars(line: str) -> str:
    """``line`` (JSON text) with every invisible character (:func:`core.escapes.is_invisible`: bidi controls,
    zero-width characters, BOM, the line/paragraph separators) written as ``\\uXXXX`` escapes: the same JSON value, but
    a terminal, an editor or the app's code view cannot reorder or hide what the line says. Other non-ASCII text
    (CJK, Cyrillic) stays readable. Such characters only occur inside JSON strings, where the escape is valid."""
    if line.isascii():
        return line
    return "".join(_json_escape(ch) if is_invisible(ch) else ch for ch in line)


def _json_escape(ch: str) -> str:
    """One character as JSON ``\\u`` escapes: :func:`core.escapes.escape_char` up to U+FFFF, a surrogate pair above
    (JSON has no ``\\U``; tag characters there are format characters)."""
    code = ord(ch)
    if code <= 0xFFFF:
        return escape_char(ch)
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _cause(ex: Any) -> str:
    tg = getattr(ex, "triage", None)
    if tg is not None and getattr(tg, "mistake", None) is not None and tg.mistake.name != "NONE":
        return f"{tg.mistake.value}: {tg.sentence}"[:300]
    if ex.findings:
        return ex.findings[0].cause.value
    return "parse differs from the expected message"


def pytest_test(ex: Any, case_id_: str | None = None, source: str | None = None,
                expect: dict[str, Any] | None = None) -> str:
    """A pytest test for this project. With ``expect`` it asserts the expected message and is marked
    ``xfail(strict=True)`` with the cause (a reproducer that fails until fixed) — unless the explanation's parse
    already gives that message (explained with the fix applied): then a regression test; without, a characterisation
    test of the message as parsed now. Either way it parses with the explanation's settings (overrides, workarounds
    off, a repair alone) and compares messages as the reference scoring does
    (:func:`core.chat.roundtrip.compare_messages`): at ``improved`` fidelity a call the model wrote without an id
    gets a random one, which an expected id left empty must not pin. With ``source`` (the template text) the test
    carries the template itself and runs from any directory; without it the template is read from
    ``../shared/templates`` by name."""
    cid = case_id_ or case_id(ex, expect, source)
    settings = _settings(ex)
    # untrusted text (template name, output, tools, source, cause) enters the file only as ASCII string literals
    # (core.codegen): the case as JSON text the test decodes; the function name is ASCII alnum only
    name = py_identifier("test_" + cid, prefix="test_")
    case = py_str(case_line(ex, cid, expect))
    # the case, the settings and the template live in the function, so tests pasted into one file (the --expect
    # reproducer beside the characterisation test of the same output) each keep their own
    head = "import json\n\nimport pytest\n\nfrom core.chat.conformance import " \
        + ("TemplateDir, run_case\n" if source is None else "run_case\n") \
        + "from core.chat.roundtrip import compare_messages\n"
    if source is None:
        templates = '    templates = TemplateDir("../shared/templates")\n'
    else:
        head += "from core.jinja.template import ChatTemplate\n"
        templates = f'    templates = {{case["template"]: ChatTemplate({py_str(source)}, case["template"])}}\n'
    if expect is not None and compare_messages(expect, ex.message) is None:
        # explained with the fix applied (a repair alone, an override): a strict xfail would XPASS at once
        mark = ""
        doc = ('    """Regression test: the expected message below is what the output should parse to, and the\n'
               '    explanation\'s settings already give it."""\n')
    elif expect is not None:
        mark = f"@pytest.mark.xfail(strict=True, reason={py_str(_cause(ex))})\n"
        doc = ('    """Reproducer: the expected message below is what the output should parse to; marked xfail\n'
               '    (strict) until the parser gives it — then remove the mark."""\n')
    else:
        mark = ""
        doc = ('    """Characterisation test: no expected message was given, so this pins the message as parsed\n'
               '    now and passes while the behaviour stays as it is. Give the expected message (explain --expect\n'
               '    FILE, or the box on the Explain page) to get a reproducer that fails until the bug is fixed."""\n')
    # the explanation's analysis settings, so the test parses as the explanation did (as JSON text, like the case)
    setting_line = (f"    settings = json.loads({py_str(json.dumps(settings, ensure_ascii=False))})\n"
                    if settings else "")
    setting_arg = ", **settings" if settings else ""
    return f'''{head}

{mark}def {name}():
{doc}    case = json.loads({case})
{setting_line}{templates}    out = run_case(case, templates, fidelity={py_str(str(ex.fidelity))}{setting_arg})
    assert "error" not in out, out.get("error")
    why = compare_messages(case["expect"], out["message"])
    assert why is None, why
'''


def _settings(ex: Any) -> dict[str, Any]:
    """The explanation's settings beyond the request and the fidelity (overrides, workarounds switched off, a
    repair switched on alone), as :func:`core.chat.conformance.run_case` takes them; empty when none."""
    out: dict[str, Any] = {}
    if getattr(ex, "overrides", None):
        out["overrides"] = dict(ex.overrides)
    if getattr(ex, "disabled_workarounds", None):
        out["disabled_workarounds"] = list(ex.disabled_workarounds)
    if getattr(ex, "only_repairs", None) is not None:
        out["only_repairs"] = list(ex.only_repairs)
    return out


def _text(value: Any) -> str:
    """A message value as text for a literal (arguments given as an object are written as their JSON)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def peg_tester_snippet(ex: Any, expect: dict[str, Any] | None = None) -> str:
    """A block to paste into ``test_template_output_peg_parsers(bool detailed_debug)`` of llama.cpp's
    ``tests/test-chat.cpp``: it declares the request's tools as ``common_chat_tool`` values (``repro_tool_N``:
    no input text in identifiers) and runs ``peg_tester(...).test(input)…run()``. The expectations are
    ``expect`` when given, else the message the current parser gives (edit them to the message you expected)."""
    req = ex.request
    msg = expect if expect is not None else ex.message
    out = ["{"]
    if expect is None:
        out.append("    // expectations = the message as parsed now: edit them to the message you expected")
    tools = [t["function"] for t in req.get("tools") or []
             if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    for i, f in enumerate(tools):
        params = json.dumps(f.get("parameters") or {"type": "object", "properties": {}}, ensure_ascii=False)
        out.append(f"    static common_chat_tool repro_tool_{i}{{ {cpp_string(str(f.get('name', '')))}, "
                   f"{cpp_string(str(f.get('description', '')))}, {cpp_string(params)} }};")
    msgs = [m for m in req.get("messages") or [] if isinstance(m, dict)]
    if msgs:
        # the request's conversation; without .messages() peg_tester renders its own one-line user message
        out.append(f"    std::vector<common_chat_msg> repro_msgs({len(msgs)});")
        for i, m in enumerate(msgs):
            out += _message_lines(f"repro_msgs[{i}]", m)
    missing = _not_in_snippet(ex)
    if missing:
        out.append(f"    // not set here (peg_test_builder has no setter): {', '.join(missing)}; this test renders a "
                   "different prompt or parser than the explanation did")
    path = template_path(ex.template)
    if llama_cpp_file(ex.template) is None:
        # (the path is the template's name reduced to safe characters: no input text in a comment)
        out.append(f"    // the template is not one of llama.cpp's models/templates/ files: save it as {path} first")
    out += [f"    auto tst = peg_tester({cpp_string(path)}, detailed_debug);",
            f"    tst.test({cpp_string(ex.output)})"]
    if msgs:
        out.append("        .messages(repro_msgs)")
    if tools:
        out.append(f"        .tools({{ {', '.join(f'repro_tool_{i}' for i in range(len(tools)))} }})")
    if req.get("parallel_tool_calls"):
        out.append("        .parallel_tool_calls(true)")
    # unset (null) renders with llama.cpp's default, true, as the explanation did; a template kwarg that set it is
    # already folded into the request's value
    out.append(f"        .enable_thinking({'false' if req.get('enable_thinking') is False else 'true'})")
    fmt = str(req.get("reasoning_format") or "auto").upper().replace("-", "_")
    if fmt not in REASONING_FORMATS:
        fmt = "AUTO"
    out.append(f"        .reasoning_format(COMMON_REASONING_FORMAT_{fmt})")
    # the other request settings peg_test_builder has setters for; enum values only from fixed tables
    choice = str(req.get("tool_choice") or "auto").upper()
    if choice in TOOL_CHOICES and choice != "AUTO":
        out.append(f"        .tool_choice(COMMON_CHAT_TOOL_CHOICE_{choice})")
    if req.get("add_generation_prompt") is False:
        out.append("        .add_generation_prompt(false)")
    cont = str(req.get("continue_final_message") or "none").upper()
    if cont in CONTINUATIONS and cont != "NONE":
        out.append(f"        .continue_final_message(COMMON_CHAT_CONTINUATION_{cont})")
    if isinstance(req.get("json_schema"), dict):
        out.append(f"        .json_schema({cpp_string(json.dumps(req['json_schema'], ensure_ascii=False))})")
    if msg.get("reasoning_content"):
        out.append(f"        .expect_reasoning({cpp_string(_text(msg['reasoning_content']))})")
    out.append(f"        .expect_content({cpp_string(_text(msg.get('content') or ''))})")
    if msg.get("tool_calls"):
        calls = ", ".join(f"{{ {cpp_string(_text(tc['function']['name']))}, "
                          f"{cpp_string(_text(tc['function'].get('arguments', '')))}, "
                          f"{cpp_string(_text(tc['id'])) if tc.get('id') else '{}'} }}" for tc in msg["tool_calls"])
        out.append(f"        .expect_tool_calls({{ {calls} }})")
    out.append("        .run();")
    out.append("}")
    return "\n".join(out) + "\n"


def _message_lines(var: str, m: dict[str, Any]) -> list[str]:
    """The C++ statements that fill the ``common_chat_msg`` ``var`` from the OpenAI message ``m``, as llama.cpp's
    server reads one: text content or its parts, reasoning, the calls of an assistant turn, a tool result's
    id and name. Text only in :func:`core.codegen.cpp_string` literals."""
    out = [f"    {var}.role = {cpp_string(str(m.get('role') or ''))};"]
    content = m.get("content")
    if isinstance(content, str) and content:
        out.append(f"    {var}.content = {cpp_string(content)};")
    for part in content if isinstance(content, list) else ():   # text / media_marker parts (request checked)
        if isinstance(part, dict):
            out.append(f"    {var}.content_parts.push_back({{ {cpp_string(str(part.get('type') or ''))}, "
                       f"{cpp_string(str(part.get('text') or ''))} }});")
    if isinstance(m.get("reasoning_content"), str) and m["reasoning_content"]:
        out.append(f"    {var}.reasoning_content = {cpp_string(m['reasoning_content'])};")
    for tc in m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else ():
        fn = tc.get("function") if isinstance(tc, dict) else None
        if isinstance(fn, dict):
            out.append(f"    {var}.tool_calls.push_back({{ {cpp_string(str(fn.get('name') or ''))}, "
                       f"{cpp_string(_text(fn.get('arguments') or ''))}, {cpp_string(str(tc.get('id') or ''))} }});")
    for key, field in (("tool_call_id", "tool_call_id"), ("name", "tool_name")):
        if m.get("role") == "tool" and isinstance(m.get(key), str) and m[key]:
            out.append(f"    {var}.{field} = {cpp_string(m[key])};")
    return out


_UNSAFE_IN_PATH = re.compile(r"[^A-Za-z0-9._-]+")
REPRO_TEMPLATE_PREFIX = "repro-"
"""Where :func:`template_path` puts a template llama.cpp does not have (``models/templates/repro-NAME.jinja``): apart
from llama.cpp's own files, one of which may have the same name (the first version of a template llama.cpp edited,
a user's changed copy)."""


def template_path(name: str) -> str:
    """The path ``peg_tester`` reads the template ``name`` (a corpus file name, a path's base name or a Hub id)
    from: llama.cpp's own ``models/templates/`` file when the template is one (:mod:`.llama_templates`), else
    ``models/templates/repro-NAME.jinja`` with ``NAME`` reduced to letters, digits, ``.``, ``_`` and ``-`` (a Hub
    id's ``/`` too), where the user saves the template first."""
    upstream = llama_cpp_file(name)
    if upstream is not None:
        return "models/templates/" + upstream
    safe = _UNSAFE_IN_PATH.sub("-", name).strip(".-") or "template"
    return f"models/templates/{REPRO_TEMPLATE_PREFIX}{safe}" + ("" if safe.endswith(".jinja") else ".jinja")


def _not_in_snippet(ex: Any) -> list[str]:
    """What the explanation parsed with that a ``peg_tester`` snippet cannot set, as fixed words (never input
    text: the line is a C++ comment): template kwargs other than ``enable_thinking`` (which the snippet sets),
    analysis overrides, workarounds switched off, a repair switched on alone."""
    req = ex.request
    missing = []
    if set(req.get("chat_template_kwargs") or {}) - {"enable_thinking"}:
        missing.append("the request's chat_template_kwargs")
    if getattr(ex, "overrides", None):
        missing.append("analysis overrides")
    if getattr(ex, "disabled_workarounds", None):
        missing.append("workarounds switched off")
    if getattr(ex, "only_repairs", None) is not None or ex.fidelity == "improved":
        missing.append("improved fidelity (llama.cpp parses as llama.cpp)")
    return missing
