"""Documents as migbake reads them: every file a user names read bounded, a regular file only (``files``); YAML with
the line and column of every key and value (``loader``), jsonschema's errors turned into located problems
(``schema_messages``), the one whole-string reading of every pattern applied to untrusted text (``patterns``), and
the depth and number bounds checked before an untrusted JSON or YAML document is parsed (``limits``); and the one
YAML emitter of everything migbake writes (``emitter``), which quotes any string a YAML 1.1, YAML 1.2 or go-yaml
reader would type, with the forms it decides by (``yamlforms``).

Shared by profiles, catalog files, imported configs and Kubernetes captures. May import only the foundation modules
(``problems``, ``wording``, ``exits``, ``resources``).
"""
