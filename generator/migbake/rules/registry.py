"""Every rule id migbake reports, in one table (``RULES``), and every check, in the order they run (``CHECKS``).

A rule is declared once. The rules of a check (``rules.general``, ``rules.layouts``, ... the modules of
``CHECK_MODULES``) are declared by ``@rule`` above it (``rules.declare``); the rules raised outside a check are
declared here, one line each, by the stage that finds them: ``document.loader`` (the YAML),
``document.schema_messages`` (the shape), ``gpu.catalogfile`` (catalog files), ``node.importer`` (``migbake
import``: a mig-parted config that a profile cannot represent) and ``node.driveroffer`` (generate-config
captures); those are all errors. And two found once the files are rendered (``render.rendered_limits``), declared in
``rules.consumer_limits`` beside the limits they check: ``karpenter-user-data-size`` and ``ec2-user-data-size``,
warnings. The rule reference ``docs/reference/rules.md`` is generated from ``RULES``
(``docs/reference/generate.py``), and ``tests/unit/test_rule_registry.py`` checks that every id the case corpus and
the code report is here with its severity, every id here has a case, and the reference lists exactly these ids.

Also the one check that reads this table: a ``validation.ignore`` entry names a warning rule of it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any

from migbake.document.loader import LoadedProfile, as_mapping
from migbake.gpu.catalog import Catalog
from migbake.problems import Problem
from migbake.rules import (
    allocation,
    consumer_limits,
    general,
    gpus,
    layoutnames,
    layouts,
    nodepaths,
    platforms,
    services,
    slurm,
    units,
)
from migbake.rules.declare import Check, Rule, Stage, rule
from migbake.rules.driver import checks as drivercontainer

# the modules whose checks run, in this order (within one, in the order they are written); a check of a new
# module runs once its module is here
CHECK_MODULES: tuple[ModuleType, ...] = (layouts, general, gpus, services, nodepaths, units, allocation, slurm,
                                         platforms, consumer_limits, layoutnames, drivercontainer)


def _declared(stage: Stage, rows: tuple[tuple[str, str], ...]) -> list[Rule]:
    return [Rule(rule_id, stage, summary) for rule_id, summary in rows]


_YAML = (
    ("unreadable", "the file cannot be read (missing, a folder, no permission)"),
    ("empty-file", "the file has no document (empty, or only comments)"),
    ("file-too-large", "the file is larger than a node profile can reasonably be"),
    ("not-utf8", "the file is not UTF-8 text"),
    ("byte-order-mark", "the file starts with a byte-order mark"),
    ("not-text", "the file holds NUL or other control characters"),
    ("yaml-syntax", "the YAML does not parse"),
    ("multiple-documents", "the file holds more than one YAML document"),
    ("not-a-mapping", "the document is not a mapping of keys"),
    ("duplicate-key", "a key appears twice in one mapping (PyYAML would silently keep the last)"),
    ("yaml-alias", "an anchor, alias or merge of YAML: write the value out"),
    ("yaml-merge-key", "a YAML merge key (<<)"),
    ("yaml-tag", "an explicit YAML tag (!!str, !custom, ...)"),
    ("yaml-key-type", "a key that is not a plain string"),
    ("yaml-1.1-bool", "yes/no/on/off: a boolean in YAML 1.1 (mig-parted) but a string in YAML 1.2"),
    ("yaml-1.1-octal", "0644-style numbers: octal in YAML 1.1, decimal in YAML 1.2"),
    ("yaml-number", "a number YAML readers disagree on (.inf, .nan, 1_000, 0x1F, ...)"),
    ("number-too-large", "a number with more digits than any field takes"),
    ("yaml-too-deep", "nesting deeper than any node profile needs"),
)
_SCHEMA = (
    ("unknown-key", "a key the schema does not know here (with 'did you mean')"),
    ("missing-key", "a required key is missing"),
    ("schema-type", "a value of the wrong type"),
    ("schema-enum", "a value outside the allowed set (with 'did you mean')"),
    ("schema-const", "a value other than the one allowed (version: 1)"),
    ("schema-pattern", "a string that does not match its pattern (names, units, paths)"),
    ("schema-name", "a key of a name map (a layout's profile names, node labels) that does not match its pattern"),
    ("schema-range", "a number below its minimum or above its maximum"),
    ("schema-size", "a string, list or map that is too short or too long"),
    ("schema-unique", "a list whose items must be unique repeats one"),
    ("mig-parted-config", "an nvidia-mig-parted config given where a node profile is read: migbake import makes one"),
)
_CATALOG = (
    ("catalog-json", "a catalog file that is not valid JSON"),
    ("catalog-duplicate-id", "two models of a catalog file share an id"),
    ("catalog-placement", "a profile's placements do not fit the model's memory slices"),
    ("catalog-text", "a key or string of a catalog file with a control character"),
    ("catalog-too-deep", "a catalog file nested deeper than any catalog needs"),
)
_IMPORT = (
    ("import-version", "the mig-parted config is not version: v1"),
    ("import-key", "a top-level key of a mig-parted config other than version and mig-configs"),
    ("import-config", "mig-configs is not a map of configs, or the chosen config is missing or empty"),
    ("import-config-name", "a config name a node profile cannot carry (migbake never renames a config)"),
    ("import-entry", "a config entry that is not a mapping of devices, mig-enabled, mig-devices (+ device-filter)"),
    ("import-devices", "devices that are not all or a list of GPU indices"),
    ("import-mig", "mig-devices that are not profile names with whole counts, or all zero"),
    ("import-model", "the GPU model cannot be told: pass --model or --nvidia-smi-xml"),
    ("import-filter-malformed", "a device-filter that is not PCI ids as mig-parted reads them"),
    ("import-filter-subsystem", "a device-filter with a subsystem id (a profile names device ids only)"),
    ("import-filter-unknown", "a device-filter naming a PCI id the catalog does not know"),
    ("import-filter-mixed", "a device-filter naming models with different MIG profiles in one entry"),
    ("import-gpu-uncovered", "a GPU of the node that no entry covers (mig-parted would fail)"),
    ("import-overlap", "two entries cover the same GPU"),
)

_CAPTURE = (
    ("gc-shape", "a generate-config capture without version: v1, mig-configs or any all-<profile> config"),
    ("gc-config", "a config name generate-config never writes (not all-<profile>)"),
    ("gc-entry", "an all-<profile> entry that is not mig-enabled with one profile in mig-devices"),
    ("gc-profile", "a profile name that is not the one its all-<profile> config names"),
    ("gc-count", "a maximum count that is not a whole number 1-64"),
    ("gc-filter", "a device-filter that is not 0xDDDDVVVV PCI device ids"),
)


def ignore_entries(data: object) -> list[tuple[str, dict[str, Any]]]:
    """The entries of a profile's ``validation.ignore`` that are mappings, with their pointers."""
    listed = as_mapping(as_mapping(data).get("validation")).get("ignore")
    if not isinstance(listed, list):
        return []
    return [(f"/validation/ignore/{i}", e) for i, e in enumerate(listed) if isinstance(e, dict)]


@rule("ignore-unknown-rule", "error", "validation.ignore names a rule id migbake does not report")
@rule("ignore-error-rule", "error", "validation.ignore names an error rule: only warnings can be ignored")
def rule_ignore(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Each ``validation.ignore`` names a rule migbake reports that warns: an error cannot be ignored."""
    for ptr, entry in ignore_entries(data):
        rule_id = entry.get("rule")
        if not isinstance(rule_id, str) or (why := why_not_ignorable(rule_id)) is None:
            continue  # the schema reports a rule that is not a string
        yield loaded.problem(f"{ptr}/rule", why, "ignore-unknown-rule" if rule_id not in RULES else "ignore-error-rule")


def checks_of(modules: Iterable[ModuleType]) -> tuple[Check, ...]:
    """The checks each module defines (not those it imports), in the order it writes them."""
    found: list[Check] = []
    for module in modules:
        found += [v for v in vars(module).values()
                  if isinstance(v, Check) and v.function.__module__ == module.__name__ and v not in found]
    return tuple(found)


CHECKS: tuple[Check, ...] = (*checks_of(CHECK_MODULES), rule_ignore)


def rule_table(rules: Iterable[Rule]) -> dict[str, Rule]:
    """Every rule by id; an id declared twice raises ValueError (a rule is declared once)."""
    table: dict[str, Rule] = {}
    for r in rules:
        if r.id in table:
            raise ValueError(f"rule id {r.id!r} is declared twice: a rule is declared once")
        table[r.id] = r
    return table


RULES: dict[str, Rule] = rule_table((*_declared("yaml", _YAML), *_declared("schema", _SCHEMA),
                                     *(r for check in CHECKS for r in check.rules),
                                     *_declared("catalog", _CATALOG), *_declared("import", _IMPORT),
                                     *_declared("capture", _CAPTURE), consumer_limits.KARPENTER_RULE,
                                     consumer_limits.EC2_RULE))
# the rule ids a suppression may name: those that only ever warn
IGNORABLE = tuple(sorted(r.id for r in RULES.values() if r.severity == "warning"))


def why_not_ignorable(rule_id: str) -> str | None:
    """Why ``rule_id`` cannot be ignored (an id migbake does not report, or an error rule); None: it can."""
    known = RULES.get(rule_id)
    if known is None:
        close = difflib.get_close_matches(rule_id, list(RULES), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return (f"{rule_id!r} is not a rule id migbake reports{hint} (warnings that can be ignored: "
                f"{', '.join(IGNORABLE)})")
    if known.severity == "error":
        return (f"{rule_id!r} is an error rule ({known.summary}): errors cannot be ignored, only warnings "
                f"({', '.join(IGNORABLE)})")
    return None


def rule_problems(loaded: LoadedProfile, catalog: Catalog) -> list[Problem]:
    """Every semantic problem of a loaded profile, its GPU models looked up in ``catalog``: every check, then the
    late ones (``@rule(..., late=True)``) with what the others found."""
    found: list[Problem] = []
    for check in CHECKS:
        if not check.late:
            found.extend(check(loaded, loaded.data, catalog))
    for check in CHECKS:
        if check.late:
            found.extend(check(loaded, loaded.data, catalog, found))
    return found
