"""The boot test's scenarios and what must be true after each boot: the Scenario type and the guest content
every scenario installs (``scenario``), the claims of every boot (``claims``), and each scenario family beside
its claims (``node`` + ``node_claims``, ``reset`` + ``reset_claims``); ``promtext`` reads the metrics file.

Test-only machinery. May import ``vm``, ``simgpu`` beside it and migbake's library.
"""
