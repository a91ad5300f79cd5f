"""Render: a validated node profile into the output tree, in memory (``tree``: the Jinja2 environment, the
quoting per output language, every file), the check every printed value passes for its language
(``guard``), the first boot's hold and start (``firstboot``), user-data delivery forms (``userdata``), and the
atomic writer with ``--check`` (``write``).

May import ``node``, ``rules``, ``kubernetes``, ``migparted``, ``profile``, ``gpu``, ``document`` and the foundation.
"""
