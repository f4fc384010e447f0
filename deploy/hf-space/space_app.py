"""Entry point of the Hugging Face Space (deploy/hf-space/README.md names it as ``app_file``): the public demo.
Demo mode is on unless the Space's settings say otherwise, then the app runs as ``streamlit run app.py`` would."""

import importlib.machinery
import os
import runpy

# As in app.py: Streamlit runs this file as a "__main__" module without a spec, and a worker process started once
# run_path below has put that module back (the background warm-up starts the first worker after the first page)
# would re-run this file, and with it the whole app in bare mode, before its work. A spec named "__main__" makes
# multiprocessing skip that re-import.
if globals().get("__spec__") is None:
    __spec__ = importlib.machinery.ModuleSpec("__main__", None)

os.environ.setdefault("CTE_DEMO", "1")
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py"), run_name="__main__")
