"""The one settings object (settings.py), secrets read from files (files.py), and a
configuration error said in one line (explain.py)."""
