"""The Hugging Face Space recipe (docs/deploying.md, deploy/hf-space/): a Space assembled from its files exactly as
the recipe's steps do, started the way the Streamlit SDK starts a Space (``streamlit run space_app.py`` from the
Space's root, no demo setting in the environment), serves the front page in demo mode and runs an analysis
(Playwright + Debian's chromium). Also: the card's SDK fields, and requirements.txt against pyproject.toml."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.request

import pytest

from bench.browser import CHROMIUM, free_port

from .conftest import ROOT
from .test_browser import ARTIFACTS, _wait_idle, wait_for_metrics

try:
    from playwright.sync_api import Error as PlaywrightError
except ImportError:  # pragma: no cover - the browser fixture skips without Playwright
    PlaywrightError = Exception  # type: ignore[assignment,misc]

SPACE = ROOT / "deploy" / "hf-space"


def _what_the_page_showed(page, err: BaseException, log_path, shot: str) -> str:
    """A failed wait's message that explains itself: the error, what the page's main block showed (an error box, a
    spinner, a Streamlit exception), the run state, and the tail of the server's log; the screenshot goes to
    ARTIFACTS/``shot``.png."""
    parts = [f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"]
    try:
        page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
        parts.append(f"screenshot: {ARTIFACTS / f'{shot}.png'}")
        text = page.locator('[data-testid="stMain"]').inner_text(timeout=5_000)
        lines = [x.strip() for x in text.splitlines() if x.strip()]
        parts.append("page main block (its top):\n" + "\n".join(lines)[:2500])
        state = page.evaluate("() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
                              " return (a ? a.getAttribute('data-test-script-state') : 'no app') + ' / ' +"
                              " (document.querySelector('[data-testid=\"stStatusWidget\"]')?.innerText ?? ''); }")
        parts.append(f"script state / status widget: {state}")
    except Exception as e:  # noqa: BLE001 - a dead page still gets the server's side told
        parts.append(f"(the page could not be read: {type(e).__name__}: {e})")
    try:
        parts.append("server log tail:\n" + log_path.read_text(encoding="utf-8", errors="replace")[-3000:])
    except OSError as e:
        parts.append(f"(no server log: {e})")
    return "\n".join(parts)


def _card() -> dict[str, str]:
    text = (SPACE / "README.md").read_text(encoding="utf-8")
    head = text.split("---\n")[1]
    return dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def test_card_and_requirements_match_the_project():
    card = _card()
    assert card["sdk"] == "streamlit" and card["app_file"] == "space_app.py"
    assert (SPACE / card["app_file"]).is_file()
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    streamlit_min = next(d for d in deps if d.startswith("streamlit")).split(">=")[1]
    assert _version(card["sdk_version"]) >= _version(streamlit_min)
    reqs = [x.strip() for x in (SPACE / "requirements.txt").read_text(encoding="utf-8").splitlines()
            if x.strip() and not x.startswith("#")]
    assert reqs == [d for d in deps if not d.startswith("streamlit")]


@pytest.mark.browser
def test_space_starts_as_the_sdk_starts_it(browser, tmp_path):  # noqa: F811 - fixture
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing")
    space = tmp_path / "space"
    space.mkdir()
    for rel in (SPACE / "files.txt").read_text(encoding="utf-8").split():      # tar -c -T files.txt | tar -x
        src = ROOT / rel
        if src.is_dir():
            shutil.copytree(src, space / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, space / rel)
    for name in ("README.md", "space_app.py", "requirements.txt"):
        shutil.copy2(SPACE / name, space / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTE_")}
    env.update(HF_HUB_OFFLINE="1", CTE_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH="")
    port = free_port()
    # the SDK's command (its port and 0.0.0.0 replaced by a free port on loopback, for the test machine)
    cmd = [sys.executable, "-m", "streamlit", "run", "space_app.py", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open(ARTIFACTS / "streamlit-space.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=space, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 90
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                        if r.read().strip() == b"ok":
                            break
                except OSError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "the Space did not start"
                time.sleep(0.3)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            try:
                page.goto(url, wait_until="networkidle")
                # generous waits: a Space's first view compiles into an empty cache and starts the worker pool, and
                # the suite runs beside it on the same cores
                page.get_by_role("heading", name="Chat Template Explorer").wait_for(timeout=120_000)
                _wait_idle(page)
                page.get_by_text("Demo mode: pastes up to", exact=False).first.wait_for(timeout=30_000)
                page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Overview", exact=True).click()
                page.get_by_role("heading", name="Overview").wait_for(timeout=120_000)
                assert "TAG_BASED" in wait_for_metrics(page, "TAG_BASED", timeout=120_000)
                page.screenshot(path=str(ARTIFACTS / "space-01-overview.png"))
            except (PlaywrightError, AssertionError) as e:
                pytest.fail(_what_the_page_showed(page, e, ARTIFACTS / "streamlit-space.log", "space-failed"))
            finally:
                page.close()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    log_text = (ARTIFACTS / "streamlit-space.log").read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log_text and "missing ScriptRunContext" not in log_text, log_text[-2000:]
