"""migbake's Jinja2 templates, shipped as the package ``migbake.templates`` (pyproject maps it to this folder)."""
