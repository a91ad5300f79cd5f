"""EC2's 16 KB user-data limit: with --user-data-gzip the MIME bundle is gzipped too, and the size check
is on the form that would be sent; the warning names --user-data-gzip only when it was not given and helps.
"""

from __future__ import annotations

import email
import gzip
from pathlib import Path

import pytest
from realtools import cloud_init_parts
from support import IMAGES, cli

from migbake.render import mime_parts

# kubelet + slurmd + node_exporter metrics, two GPU models, node labels: a busy, realistic node
REALISTIC = """\
version: 1
name: gpu-node-kubelet-slurm
description: 8x H100 80GB or H200 SXM, Kubernetes inference and Slurm batch on the same node
gpu_count: 8
gpus:
  - model: h100-80gb
    devices: all
    mig:
      layout: {1g.10gb: 3, 2g.20gb: 2}
  - model: h200-141gb
    devices: all
    mig:
      layout: {1g.18gb: 3, 2g.35gb: 2}
kubelet: {present: true}
consumers:
  - unit: slurmd.service
  - unit: dcgm-exporter.service
    fail_closed: false
restore:
  metrics_textfile: /var/lib/node_exporter/textfile_collector/migbake.prom
kubernetes:
  mig_strategy: mixed
  kubelet_args_env: KUBELET_EXTRA_ARGS
  node_labels: {nvidia.com/gpu.deploy.mig-manager: "false", example.com/pool: mig-inference}
"""


def _part(size: int) -> str:
    """A shell part of about ``size`` bytes, written as a site's bootstrap script is: many similar lines."""
    lines = ["#!/bin/bash", "set -euo pipefail", 'NODE="$(hostname -s)"']
    i = 0
    while sum(len(x) + 1 for x in lines) < size:
        lines.append(f'if ! grep -q "^mount{i}" /etc/fstab; then echo "fs{i % 7}.storage.example.com:/export/'
                     f'team{i} /mnt/team{i} nfs4 rw,noatime,vers=4.2 0 0" >> /etc/fstab; fi  # {i * 7919 % 10007}')
        i += 1
    return "\n".join(lines) + "\n"


def test_gzip_with_a_mime_part_fits(tmp_path: Path) -> None:
    profile = tmp_path / "node.yaml"
    profile.write_text(REALISTIC)
    part = tmp_path / "bootstrap.sh"
    part.write_text(_part(20 * 1024))
    assert part.stat().st_size >= 20 * 1024
    out = tmp_path / "out"
    code, _, err = cli("generate", str(profile), "-o", str(out), "--user-data-gzip", "--user-data-mime", str(part))
    assert code == 0, err
    plain = (out / "cloud-init/user-data").read_bytes()
    assert len(plain) > 14000, len(plain)  # the realistic size this test is about
    mime = (out / "cloud-init/user-data.mime").read_bytes()
    sent = (out / "cloud-init/user-data.mime.gz").read_bytes()
    assert len(mime) > mime_parts.EC2_USER_DATA_LIMIT  # the bundle itself does not fit ...
    assert len(sent) <= mime_parts.EC2_USER_DATA_LIMIT, len(sent)  # ... what is sent does
    assert sent[:2] == b"\x1f\x8b" and gzip.decompress(sent) == mime  # cloud-init's gzip detection
    parts = [p for p in email.message_from_bytes(gzip.decompress(sent)).walk() if not p.is_multipart()]
    assert [p.get_payload(decode=True) for p in parts] == [part.read_bytes(), plain]
    assert "above EC2" not in err, err


EKS_IMAGE = next(p for p in IMAGES if p.name == "h200-inference")  # kubelet.layout eks-al2023: an EC2 node


def test_the_warning_is_on_what_would_be_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = str(EKS_IMAGE / "node-profile.yaml")
    small = tmp_path / "small.sh"
    small.write_text("#!/bin/sh\necho hi\n")
    monkeypatch.setattr(mime_parts, "EC2_USER_DATA_LIMIT", 13000)  # plain ~20 KB, gzipped ~7 KB; MIME.gz ~11 KB
    code, _, err = cli("generate", profile, "-o", str(tmp_path / "a"))
    assert code == 0
    assert err == (f"{profile}:17:11: warning: /kubelet/layout: cloud-init/user-data is "
                   f"{(tmp_path / 'a/cloud-init/user-data').stat().st_size} bytes: as EC2 instance user data it is "
                   "above EC2's 16 KB limit; use --user-data-gzip: gzipped it fits (kubelet.layout eks-al2023 is an "
                   "EKS node on EC2; a profile whose user-data never reaches EC2 sets this aside with "
                   "validation.ignore) [ec2-user-data-size]\n")
    for args in (["--user-data-gzip"], ["--user-data-gzip", "--user-data-mime", str(small)]):
        code, _, err = cli("generate", profile, "-o", str(tmp_path / "b"), "--force", *args)
        assert code == 0 and err == "", err  # the gzipped form is sent, and it fits
    code, _, err = cli("generate", profile, "-o", str(tmp_path / "c"), "--user-data-mime", str(small))
    assert code == 0 and "cloud-init/user-data.mime is" in err and "; use --user-data-gzip" in err, err

    # gzip given, still too big: no option is named, as none would help
    monkeypatch.setattr(mime_parts, "EC2_USER_DATA_LIMIT", 1000)
    code, _, err = cli("generate", profile, "-o", str(tmp_path / "d"), "--user-data-gzip", "--user-data-mime",
                       str(small))
    said = f"{profile}:17:11: warning: /kubelet/layout: cloud-init/user-data.mime.gz is "
    assert code == 0 and err.startswith(said), err
    assert "even gzipped" in err and "--user-data-gzip" not in err, err
    # not given, but would not help either: not named
    code, _, err = cli("generate", profile, "-o", str(tmp_path / "e"))
    assert code == 0 and "gzipped too" in err and "--user-data-gzip" not in err, err


@pytest.mark.parametrize("name", ["héllo.sh", "ü" * 100 + ".sh", "日本語.sh", "plain.sh"],
                         ids=["accent", "long", "cjk", "ascii"])
def test_a_part_keeps_its_file_name_in_cloud_init(name: str, tmp_path: Path) -> None:
    """A non-ASCII file name made the whole Content-Disposition one RFC 2047 encoded word, so
    cloud-init found no filename and named the part part-001; an RFC 2231 parameter keeps it."""
    part = tmp_path / name
    part.write_text("#!/bin/sh\necho mine\n")
    out = tmp_path / "out"
    code, _, err = cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(out), "--user-data-mime", str(part))
    assert code == 0, err
    assert cloud_init_parts(out / "cloud-init/user-data.mime") == [("text/x-shellscript", name),
                                                                   ("text/cloud-config", "migbake-user-data")]
    parts = [p for p in email.message_from_bytes((out / "cloud-init/user-data.mime").read_bytes()).walk()
             if not p.is_multipart()]
    assert parts[0].get_filename() == name  # Python's reader agrees
