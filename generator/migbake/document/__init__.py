"""Documents as migbake reads them: YAML with the line and column of every key and value (``loader``), PyYAML's tag
resolution made quick (``quickyaml``), jsonschema's errors turned into located problems (``schema_messages``),
and the one whole-string reading of every pattern applied to untrusted text (``patterns``).

Shared by profiles, catalog files and imported configs. May import only the foundation modules
(``problems``, ``wording``, ``exits``, ``resources``).
"""
