"""Documents as migbake reads them: YAML with the line and column of every key and value (``loader``), PyYAML's tag
resolution made quick (``quickyaml``), and jsonschema's errors turned into located problems (``schema_messages``).

Shared by profiles, catalog files and imported configs. May import only the foundation modules
(``problems``, ``wording``, ``exits``, ``resources``).
"""
