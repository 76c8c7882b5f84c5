"""A large 210 file mapped on two cores: the parent (parent.py) and its mapping child
(child.py), the fork server that starts children (forkserver.py), and how blocks are shared
(layout.py)."""
