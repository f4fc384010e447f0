"""Chat Template Explorer — Streamlit entry point (navigation only).

Run: ``streamlit run app.py``. Pages live in ``explorer/pages/``; state and cached engine calls in
``explorer/state.py``. Works offline: the bundled examples in ``assets/templates/`` are the default.
"""

import importlib.machinery
import logging

import streamlit as st

# Streamlit runs this script as a fresh module named "__main__" without a spec. A worker process the pages start
# (the isolated analysis, forkserver/spawn) then re-runs the *script file* as its own __main__ before it does its
# work: every st.* call of the page, in bare mode, printed "missing ScriptRunContext!" (~56 lines a session) and
# "use Streamlit in a file and run it with streamlit run". With a spec named "__main__", multiprocessing skips
# that re-import (multiprocessing.spawn._fixup_main_from_name).
if globals().get("__spec__") is None:
    __spec__ = importlib.machinery.ModuleSpec("__main__", None)

from explorer import preload, resume, state, urlstate, visitor
from explorer.components import sidebar

# page code from here to the end of the run: the background imports wait for it, and it waits for the one import
# running, never beside it (two threads importing one package at once broke a page: explorer.preload)
preload.page_started()

# the icon is our own file, served by this server: a :material/…: page icon is fetched from fonts.gstatic.com
st.set_page_config(page_title="Chat Template Explorer", page_icon=str(state.ASSETS / "icon.png"), layout="wide")
state.keep_inputs()
visitor.name_this_run()  # demo mode: one analysis slot per browser session at a time (core.serving.work_slot)


def _page(path: str, title: str, icon: str, **kw) -> st.Page:
    return st.Page(f"explorer/pages/{path}", title=title, icon=icon, **kw)


# grouped by what a visitor came to do (the front page names the same three stories); every page listed, none
# folded away behind "View more"
PAGES = {
    "": [_page("home.py", "Start here", ":material/home:", default=True)],
    "Understand a template": [
        _page("overview.py", "Overview", ":material/search:"),
        _page("comparisons.py", "Comparisons", ":material/compare_arrows:"),
        _page("overrides.py", "Overrides", ":material/tune:"),
        _page("grammar.py", "Grammar", ":material/account_tree:"),
    ],
    "Parse model output": [
        _page("playground.py", "Playground", ":material/play_arrow:"),
        _page("explain.py", "Explain", ":material/troubleshoot:"),
    ],
    "Write a template": [
        _page("edit.py", "Edit", ":material/edit:"),
        _page("lint.py", "Lint", ":material/rule:"),
        _page("compare.py", "Compare", ":material/difference:"),
    ],
    "Load and export": [
        _page("sources.py", "Sources", ":material/folder_open:"),
        _page("corpus.py", "Corpus", ":material/table_view:"),
        _page("export.py", "Export", ":material/ios_share:"),
    ],
}

nav = st.navigation(PAGES, expanded=True)
resume.recall(page_is_default=nav.url_path == "")   # a reconnected page's next click keeps its template
sidebar.render()
resume.remember()
# what a link asked for and did not get, above the page it opened (the sidebar's foot is below the fold)
urlstate.show_link_notice(nav.url_path)
try:
    nav.run()
except Exception as e:  # noqa: BLE001 - a failing page shows a message, never a traceback (logged for us)
    logging.getLogger("explorer").exception("page failed")
    state.show_error(e, "This page failed: ")
finally:  # st.stop / st.rerun end a page with a BaseException: the first run starts the imports all the same
    # after the first run's page: the other pages' libraries load while the visitor reads it. Not beside a
    # first view's background analysis (explorer.state.analysis_pending): the imports and a second worker's start
    # took the two cores from it (its result came 3-4 s later); the rerun that shows its result starts them.
    if not state.any_job_running():
        preload.start()
    state.finished_run()
    preload.page_finished()
