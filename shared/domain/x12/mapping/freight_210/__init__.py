"""The 210 (motor carrier freight invoice): mapped segment by segment (document.py), or, for
the common 210, straight to JSON bytes (fast.py, leg.py)."""
