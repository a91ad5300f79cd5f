"""Disk images without mounting: ext4 from a directory, a NoCloud seed, and debugfs read-back."""

from __future__ import annotations

from pathlib import Path

from migbake_boottest.errors import BootTestError
from migbake_boottest.hostrun import Log, no_log, require_tools, run


def make_disk(rootfs: Path, image: Path, *, size_mb: int = 1024, log: Log = no_log) -> Path:
    """Write ``rootfs`` into a new sparse ext4 image (``mkfs.ext4 -d``, well under a second)."""
    require_tools("mkfs.ext4")
    image.parent.mkdir(parents=True, exist_ok=True)
    image.unlink(missing_ok=True)
    with image.open("wb") as handle:
        handle.truncate(size_mb * 1024 * 1024)
    run(["mkfs.ext4", "-q", "-F", "-L", "rootfs", "-E", "root_owner=0:0", "-d", rootfs, image], log=log)
    return image


def make_seed(user_data: Path, seed: Path, *, instance_id: str, hostname: str = "vm-under-test",
              log: Log = no_log) -> Path:
    """A vfat NoCloud seed disk (label CIDATA) holding ``user_data`` and a generated meta-data."""
    require_tools("mkfs.vfat", "mcopy")
    folder = seed.parent / f"{seed.name}.d"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "user-data").write_bytes(user_data.read_bytes())
    (folder / "meta-data").write_text(f"instance-id: {instance_id}\nlocal-hostname: {hostname}\n")
    seed.unlink(missing_ok=True)
    run(["mkfs.vfat", "-n", "CIDATA", "-C", seed, "2048"], log=log)
    run(["mcopy", "-i", seed, folder / "user-data", folder / "meta-data", "::"], log=log)
    return seed


def read_file(image: Path, guest_path: str, *, log: Log = no_log) -> str | None:
    """The text of ``guest_path`` inside the ext4 ``image``, or None if it does not exist."""
    require_tools("debugfs")
    if not _exists(image, guest_path, log):
        return None
    return run(["debugfs", "-R", f"cat {_quoted(guest_path)}", image], log=log).stdout


def remove_file(image: Path, guest_path: str, *, log: Log = no_log) -> None:
    """Delete ``guest_path`` inside the ext4 ``image`` if it exists (``debugfs -w``)."""
    require_tools("debugfs")
    if _exists(image, guest_path, log):
        proc = run(["debugfs", "-w", "-R", f"rm {_quoted(guest_path)}", image], log=log)
        if _exists(image, guest_path, log):
            raise BootTestError(f"debugfs could not remove {guest_path} from {image}: {proc.stderr.strip()}")


def _exists(image: Path, guest_path: str, log: Log) -> bool:
    # debugfs exits 0 even when the path is missing; only its stderr tells.
    proc = run(["debugfs", "-R", f"stat {_quoted(guest_path)}", image], log=log)
    return "File not found" not in proc.stderr and proc.stdout.strip() != ""


def _quoted(guest_path: str) -> str:
    if '"' in guest_path or "\n" in guest_path or not guest_path.startswith("/"):
        raise BootTestError(f"unsupported guest path for debugfs: {guest_path!r}")
    return f'"{guest_path}"'
