"""Entry point of the Hugging Face Space (deploy/hf-space/README.md names it as ``app_file``): the public demo.
Demo mode is on unless the Space's settings say otherwise, then the app runs as ``streamlit run app.py`` would."""

import os
import runpy

os.environ.setdefault("CTE_DEMO", "1")
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py"), run_name="__main__")
