"""Mapping the sets read into documents of our kinds: the file into a batch (files.py), each
set's values (numbers.py), the 810 and the 210."""
