"""An X12 file's bytes kept in a spooled file as they arrive (file.py), and its pages as the
reader reads them (pages.py)."""
