"""Every rule id migbake reports, in one table: its id, its severity, the stage that finds it, and one line.

A problem's ``rule`` is one of these ids (``tests/test_rule_registry.py`` checks every id the case corpus
and the code report is here, and every id here has a case); the rule reference in
``docs/reference/rules.md`` is generated from this table and the corpus. The checks themselves live
where their stage runs: ``document.loader`` (the YAML), ``document.schema_messages`` (the shape),
``gpu.catalogfile`` (catalog files), ``node.importer`` (``migbake import``: a mig-parted config that a
profile cannot represent), ``node.driveroffer`` (generate-config captures) and the rule modules beside this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Stage = Literal["yaml", "schema", "rules", "catalog", "import", "capture"]


@dataclass(frozen=True)
class Rule:
    """One rule id: what a problem with it means."""

    id: str
    stage: Stage
    summary: str
    severity: Literal["error", "warning"] = "error"


def _table(stage: Stage, rows: tuple[tuple[str, str], ...], severity: dict[str, str] | None = None) -> list[Rule]:
    warn = severity or {}
    return [Rule(rule_id, stage, summary, "warning" if warn.get(rule_id) else "error") for rule_id, summary in rows]


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
    ("schema-enum", "a value outside the allowed set"),
    ("schema-const", "a value other than the one allowed (version: 1)"),
    ("schema-pattern", "a string that does not match its pattern (names, units, paths)"),
    ("schema-name", "a key of a name map (a layout's profile names, node labels) that does not match its pattern"),
    ("schema-range", "a number below its minimum or above its maximum"),
    ("schema-size", "a string, list or map that is too short or too long"),
    ("schema-unique", "a list whose items must be unique repeats one"),
    ("mig-parted-config", "an nvidia-mig-parted config given where a node profile is read: migbake import makes one"),
)
_RULES = (
    ("unknown-model", "a GPU model the catalog does not know (with 'did you mean')"),
    ("ambiguous-model", "a name that covers catalog models with different MIG profiles (H100, GH200, ...)"),
    ("no-mig", "a GPU without MIG (L40S, L4, A10, T4) that does not say mig: {enabled: false}"),
    ("unknown-profile", "a MIG profile the GPU model does not have"),
    ("non-canonical-profile", "a profile name mig-parted would not match literally (7c.7g.40gb)"),
    ("count-not-positive", "a layout count of zero or less"),
    ("count-above-max", "more instances of a profile than the GPU model allows"),
    ("media-extension", "more than one +me instance on a GPU"),
    ("compute-slices", "the layout needs more compute slices than the GPU has"),
    ("placement", "the instances cannot be placed on the GPU's memory slices without overlap"),
    ("empty-layout", "MIG on with no instances: the device plugin fails on such a GPU"),
    ("layout-without-mig", "a layout on an entry with MIG off"),
    ("device-overlap", "two gpus entries name the same GPU index"),
    ("device-out-of-range", "a GPU index beyond gpu_count"),
    ("devices-without-gpu-count", "explicit devices without gpu_count: coverage cannot be checked"),
    ("device-uncovered", "with gpu_count: a GPU that no entry covers"),
    ("model-uncovered", "with a device-filter: a model whose entries leave GPUs out"),
    ("mig-strategy-single", "kubernetes.mig_strategy single with more than one MIG device type"),
    ("driver-container", "driver: container (the GPU Operator's driver) cannot be restored before kubelet"),
    ("unit-name-clash", "two of the restore's units, or a unit and a consumer, share a name"),
    ("managed-config-path", "restore.config_path is the GPU Operator's managed config file"),
    ("config-path-in-systemd", "restore.config_path inside a systemd unit directory"),
    ("pci-device-id", "pci_device_ids not of the entry's own GPU model"),
    ("pci-ids-unfiltered", "pci_device_ids on a config without a device-filter that would carry them"),
    ("driver-wait-timeout", "restore.driver_wait_seconds not below restore.timeout_seconds"),
    ("consumer-clash", "a consumer that is kubelet, the restore itself, or listed twice"),
    ("provided-later-unknown", "an image.provided_later unit that is neither kubelet's nor a fail-closed consumer's"),
    ("node-labels-no-args-env", "kubernetes.node_labels with kubelet.layout generic and no kubelet_args_env"),
    ("node-labels-env-file", "kubelet.layout generic: an EnvironmentFile= of kubelet may override kubelet_args_env"),
    ("args-env-with-layout", "kubernetes.kubelet_args_env with a kubelet.layout other than generic"),
    ("node-labels-no-kubelet", "kubernetes.node_labels with kubelet.present: false"),
    ("node-label-restricted", "a node label kubelet may not set on itself (kubernetes.io/ and k8s.io/)"),
    ("node-label-mig-owner", "a node label that hands MIG to the GPU Operator's mig-manager"),
    ("config-name-label", "restore.config_name no label value can carry (a trailing - . _): nvidia.com/mig.config "
                          "cannot select it"),
    ("output-path-clash", "two paths of the node at one file (two outputs, or a tool and an output), or a file "
                          "where another needs a folder"),
    ("output-path-not-allowed", "a file migbake writes outside its own folders (restore.config_path: /etc/nvidia-mig/"
                                " or /etc/migbake/; restore.metrics_textfile: the textfile collector's; the "
                                "downloaded nvidia-mig-parted: /opt/)"),
    ("restore-ordering-cycle", "a consumer or kubelet that the restore unit is itself ordered after"),
    ("restore-unit-shadows", "restore.unit named like a unit the node already has (NVIDIA, systemd, kubelet)"),
    ("dra-stranded-gpu", "allocation dra: a MIG GPU with no instances (the DRA driver publishes nothing of it)"),
    ("dra-dynamic-layout", "kubernetes.allocation dra-dynamic with a layout (DynamicMIG destroys it at start)"),
    ("dra-device-plugin-setting", "a device-plugin setting (mig_strategy) under a DRA allocation: it does not apply"),
    ("placements-without-dra", "restore.placements without kubernetes.allocation dra: ignored"),
    ("placements-strict-model", "restore.placements strict: fails on migbake's placement model, not a fact"),
    ("dra-compute-instance", "allocation dra: a compute-instance profile (the DRA driver knows whole GIs only)"),
    ("dra-device-name", "allocation dra: a profile whose device name cannot be told (no GI id) or is no DNS label"),
    ("dra-driver-version", "kubernetes.dra_driver_version: a release whose device names migbake does not know"),
    ("bottlerocket-dra", "bottlerocket.required under a DRA allocation: its MIG settings are the device plugin's"),
    ("openshift-binary-in-image", "a download of nvidia-mig-parted: the OpenShift MachineConfig takes data: URLs only"),
    ("unit-line-too-long", "consumers or node labels that make a unit line of 2048 bytes or more (Ignition, "
                           "butane: go-systemd's unit parser refuses it)"),
    ("cluster-api-limit", "node labels longer than Cluster API's kubeletExtraArgs value limit (1024, v1beta2 CRD)"),
    ("mig-parted-url-invalid", "tools.nvidia_mig_parted_url that Ignition's URL parser (Go's net/url) refuses, "
                               "or that it cannot fetch (no host, a port above 65535)"),
    ("mig-parted-path-read-only", "tools.nvidia_mig_parted_url with tools.nvidia_mig_parted on the read-only /usr"),
    ("openshift-role-shared", "openshift.role worker or master: the MachineConfig goes to every node of that pool"),
    ("bottlerocket-inexpressible", "bottlerocket.required: a layout Bottlerocket cannot express (mixed, model)"),
    ("kubelet-args-env-unsafe", "kubelet_args_env names a variable the loader, a shell or systemd reads (PATH, LD_*)"),
    ("slurm-node-name", "slurm.node_name is not a hostlist slurmd reads as written ([01-04, [x-y], [09-01], twice)"),
    ("slurm-gpu-count", "slurm.autodetect false without gpu_count: no device lines for 'devices: all'"),
    ("eks-al2-unpublished", "kubelet.layout eks-al2: EKS no longer publishes Amazon Linux 2 AMIs"),
    ("layouts-with-layout", "mig.layout and mig.layouts in one gpus entry"),
    ("layout-name-missing", "mig.layouts: an entry with MIG on that lacks a name another entry gives (coverage)"),
    ("layouts-without-source", "mig.layouts without restore.layout: the node cannot tell which name to apply"),
    ("layout-source-without-layouts", "restore.layout without mig.layouts: there is no name to choose"),
    ("layout-name-reserved", "a mig.layouts name that is the GPU Operator's default config (all-disabled)"),
    ("layout-default-unknown", "restore.layout.default is not one of the mig.layouts names"),
    ("layouts-config-name", "restore.config_name with mig.layouts: the config names are the layout names"),
    ("layout-source-unsupported", "restore.layout.from names a source the restore does not read yet "
                                  "(gce-metadata, ec2-tag)"),
    ("layouts-not-yet-supported", "mig.layouts with an output that does not follow the names yet (DRA, Slurm, "
                                  "Bottlerocket, mig_strategy single)"),
    ("ignore-unknown-rule", "validation.ignore names a rule id migbake does not report"),
    ("ignore-error-rule", "validation.ignore names an error rule: only warnings can be ignored"),
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

RULES: dict[str, Rule] = {rule.id: rule for rule in (
    *_table("yaml", _YAML), *_table("schema", _SCHEMA),
    *_table("rules", _RULES, {"empty-layout": "warning", "devices-without-gpu-count": "warning",
                              "node-labels-env-file": "warning", "dra-device-plugin-setting": "warning",
                              "placements-without-dra": "warning", "placements-strict-model": "warning",
                              "slurm-gpu-count": "warning",
                              "openshift-binary-in-image": "warning", "mig-parted-path-read-only": "warning",
                              "openshift-role-shared": "warning",
                              "bottlerocket-inexpressible": "warning",
                              "eks-al2-unpublished": "warning", "config-name-label": "warning"}),
    *_table("catalog", _CATALOG), *_table("import", _IMPORT), *_table("capture", _CAPTURE),
)}
