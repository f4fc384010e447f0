"""Shared test fixtures: where the reference material lives (../shared, read-only)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import pathlib

import pytest

from core.jinja.hf import pinned_clock

ROOT = pathlib.Path(__file__).resolve().parent.parent
# resolved as the app resolves the folders it may read: ../shared may be a link to where the material lives
SHARED = (ROOT.parent / "shared").resolve()
TEMPLATES = SHARED / "templates"
REFERENCE = SHARED / "reference"
# explain's triage is bounded by work with a backstop of CPU seconds that only hostile outputs reach (a slower
# machine fits fewer of their candidates); the tests (and the CLI and app servers they start, which inherit this)
# raise the backstop so that their answers on those do not depend on the machine's speed
os.environ.setdefault("CTE_EXPLAIN_BUDGET_S", "30")
# likewise the analysis budget (5 s by default, for visitors): a starved machine must not turn a real template's
# analysis into a limit error; the tests of the budget itself pass their own budget_s or set the variable
os.environ.setdefault("CTE_ANALYSIS_BUDGET_S", "60")

# The moment llama.cpp rendered ../shared/reference (read off the Hunyuan prompt in analysis.jsonl, which prints
# "2026-11-30 01:57:31 星期一"). Every test sees this clock, so templates that print today's date render as the
# reference did on any day the suite runs.
REFERENCE_CLOCK = dt.datetime(2026, 11, 30, 1, 57, 31)


@pytest.fixture(autouse=True, scope="session")
def _reference_clock():
    """Pin ``strftime_now`` and the request path's date context to :data:`REFERENCE_CLOCK` for the session."""
    with pinned_clock(REFERENCE_CLOCK):
        yield


def _jsonl(path: pathlib.Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def reference_analysis() -> dict[str, dict]:
    """reference/analysis.jsonl keyed by template file name."""
    return {r["template"]: r for r in _jsonl(REFERENCE / "analysis.jsonl")}


@pytest.fixture(scope="session")
def reference_cases() -> list[dict]:
    """reference/cases.jsonl rows."""
    return _jsonl(REFERENCE / "cases.jsonl")


def template_source(name: str) -> str:
    """Source text of a corpus template in ../shared/templates."""
    return (TEMPLATES / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------------
# fuzz budget (tests/test_fuzz_parsers.py): `pytest --fuzz-examples N` or the environment variable
# CTE_FUZZ_EXAMPLES=N raises the number of hypothesis examples per fuzz test from its small default.

_FUZZ_EXAMPLES: int | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-examples", type=int, default=None, metavar="N",
                     help="hypothesis examples per parser fuzz test (default: small; env CTE_FUZZ_EXAMPLES)")


def pytest_configure(config: pytest.Config) -> None:
    global _FUZZ_EXAMPLES
    # Property tests draw the same examples on every run (a red CI must mean a change broke something, not an
    # unlucky draw); CTE_FUZZ_RANDOM=1 draws new ones, for bug hunting.
    import os

    from hypothesis import settings as _hsettings

    _hsettings.register_profile("deterministic", derandomize=True, database=None)
    _hsettings.register_profile("random")
    _hsettings.load_profile("random" if os.environ.get("CTE_FUZZ_RANDOM") == "1" else "deterministic")
    value = config.getoption("--fuzz-examples", default=None)
    if value is not None:
        if value < 1:
            raise pytest.UsageError(f"--fuzz-examples must be >= 1, got {value}")
        _FUZZ_EXAMPLES = value


def fuzz_examples(default: int) -> int:
    """Hypothesis examples per fuzz test: ``--fuzz-examples N``, else ``$CTE_FUZZ_EXAMPLES``, else ``default``.
    Raises ``pytest.UsageError`` when the environment variable is not a positive integer."""
    import os

    if _FUZZ_EXAMPLES is not None:
        return _FUZZ_EXAMPLES
    env = os.environ.get("CTE_FUZZ_EXAMPLES", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise pytest.UsageError(f"CTE_FUZZ_EXAMPLES must be an integer, got {env!r}") from None
        if n < 1:
            raise pytest.UsageError(f"CTE_FUZZ_EXAMPLES must be >= 1, got {n}")
        return n
    return default


# ---------------------------------------------------------------------------------------------------------------
# real-browser tests (tests/test_browser*.py): one chromium and one default-configured ``streamlit run app.py``
# for the whole session. Every test opens its own page (its own Streamlit session), so sharing them proves the
# same as one per file and saves a server start, a first analysis and a browser launch per file. Files that need
# another configuration start their own server with :func:`streamlit_server`.

ARTIFACTS = ROOT / "tests" / "artifacts"
# under pytest-xdist each worker runs its own app server, so each writes its own log
APP_LOG_NAME = (f"streamlit-{os.environ['PYTEST_XDIST_WORKER']}.log" if "PYTEST_XDIST_WORKER" in os.environ
                else "streamlit.log")


@contextlib.contextmanager
def streamlit_server(env: dict[str, str] | None = None, log_name: str = APP_LOG_NAME,
                     extra_args: tuple[str, ...] = (), script: str = "app.py"):
    """``streamlit run app.py`` (or another ``script`` of the checkout) on a free local port
    (:func:`bench.browser.serve`; ``env`` replaces its default offline environment); yields its URL once
    ``/_stcore/health`` answers
    (fails the test after 90 s or when it exits), stops it afterwards. Output goes to ``tests/artifacts/<log_name>``."""
    from bench.browser import CHROMIUM, serve

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: apt-get install chromium)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open(ARTIFACTS / log_name, "w") as log:
        try:
            with serve(log, env=env, extra_args=extra_args, script=script) as url:
                yield url
        except RuntimeError as e:
            pytest.fail(f"{e}; see {ARTIFACTS / log_name}")


@pytest.fixture(scope="session")
def app_url():
    """The default-configured app server, shared by the browser tests; its log is ``ARTIFACTS / APP_LOG_NAME``."""
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    from bench.browser import CHROME_ARGS, CHROMIUM

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()
