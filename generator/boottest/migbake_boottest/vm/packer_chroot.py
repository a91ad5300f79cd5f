"""A real ``packer build`` into a rootfs folder, through a private sshd that chroots root into it.

The template's ``null.ssh`` source connects to 127.0.0.1:PORT as root with a throw-away key; sshd's
``ChrootDirectory`` is a bind mount of the rootfs under /run (sshd refuses a chroot below a
world-writable directory such as /tmp). Transfers use ``internal-sftp``: a minbase rootfs has no scp.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from migbake_boottest.errors import BootTestError
from migbake_boottest.hostrun import Log, no_log, require_tools, run, tail

SSHD = "/usr/sbin/sshd"
BUILD_SOURCE = "null.ssh"


@dataclass(frozen=True)
class SshEndpoint:
    """Where the chrooted sshd listens, and the key that logs in as root."""

    host: str
    port: int
    user: str
    private_key: Path


@dataclass(frozen=True)
class PackerRun:
    """The outcome of ``packer build``."""

    exit_code: int
    duration_s: float
    output: str


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def chroot_sshd(rootfs: Path, *, workdir: Path, log: Log = no_log) -> Iterator[SshEndpoint]:
    """Run a private sshd on 127.0.0.1 that chroots root into ``rootfs``; always cleaned up.

    Cleanup kills the sshd by its PID and unmounts the bind mount, even when the body raises.
    """
    require_tools(SSHD, "ssh-keygen", "ssh", "mount", "umount")
    workdir.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    with ExitStack() as stack:
        for name in ("hostkey", "client"):  # throw-away keys, removed again on the way out
            for path in (workdir / name, workdir / f"{name}.pub"):
                path.unlink(missing_ok=True)
                stack.callback(path.unlink, missing_ok=True)
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", workdir / name], log=log)
        (workdir / "authorized_keys").write_bytes((workdir / "client.pub").read_bytes())
        mountpoint = Path(tempfile.mkdtemp(prefix="migbake-chroot.", dir="/run"))
        stack.callback(mountpoint.rmdir)
        run(["mount", "--bind", rootfs, mountpoint], log=log)
        stack.callback(lambda: run(["umount", "--lazy", mountpoint], log=log))
        port = free_port()
        config = _write_config(workdir, mountpoint, port)
        run([SSHD, "-t", "-f", config], log=log)
        with (workdir / "sshd.log").open("w") as sshd_log:
            proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                    stdout=sshd_log, stderr=subprocess.STDOUT)
        stack.callback(_stop, proc)
        endpoint = SshEndpoint("127.0.0.1", port, "root", workdir / "client")
        _wait_for_login(endpoint, proc, workdir / "sshd.log", log)
        log(f"sshd (pid {proc.pid}) on 127.0.0.1:{port} chroots root into {rootfs}")
        yield endpoint


def packer_build(template_dir: Path, endpoint: SshEndpoint, *, cwd: Path, log: Log = no_log,
                 timeout_s: float = 600) -> PackerRun:
    """Run ``packer build -only=null.ssh`` of ``template_dir`` against ``endpoint`` (no check).

    Runs in ``cwd``, where relative outputs of the template (a manifest, say) land.
    """
    require_tools("packer")
    start = time.monotonic()
    proc = run(
        ["packer", "build", "-color=false", f"-only={BUILD_SOURCE}", "-var", f"ssh_host={endpoint.host}",
         "-var", f"ssh_port={endpoint.port}", "-var", f"ssh_username={endpoint.user}",
         "-var", f"ssh_private_key_file={endpoint.private_key}", template_dir.resolve()],
        log=log, cwd=cwd, env={"CHECKPOINT_DISABLE": "1"}, timeout_s=timeout_s, check=False,
    )
    return PackerRun(proc.returncode, time.monotonic() - start, proc.stdout + proc.stderr)


def build_into_rootfs(template_dir: Path, rootfs: Path, *, workdir: Path, log: Log = no_log) -> PackerRun:
    """``packer build`` the template into ``rootfs``; a failed build raises BootTestError with its output."""
    with chroot_sshd(rootfs, workdir=workdir, log=log) as endpoint:
        result = packer_build(template_dir, endpoint, cwd=workdir, log=log)
    (workdir / "packer-build.log").write_text(result.output)
    log(f"packer build exited {result.exit_code} after {result.duration_s:.1f} s")
    if result.exit_code != 0:
        raise BootTestError(f"packer build of {template_dir} failed (exit {result.exit_code}):\n"
                            + tail(result.output, 40))
    return result


def _write_config(workdir: Path, chroot: Path, port: int) -> Path:
    config = workdir / "sshd_config"
    config.write_text(
        f"ListenAddress 127.0.0.1:{port}\n"
        f"HostKey {workdir / 'hostkey'}\n"
        f"PidFile {workdir / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {workdir / 'authorized_keys'}\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\n"
        f"Match User root\n    ChrootDirectory {chroot}\n"
    )
    return config


def _wait_for_login(endpoint: SshEndpoint, proc: subprocess.Popen[bytes], sshd_log: Path, log: Log) -> None:
    probe = ["ssh", "-q", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
             "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=2", "-i", str(endpoint.private_key),
             "-p", str(endpoint.port), f"{endpoint.user}@{endpoint.host}", "true"]
    for _ in range(100):
        if proc.poll() is not None:
            break
        if subprocess.run(probe, capture_output=True, stdin=subprocess.DEVNULL, check=False).returncode == 0:
            return
        time.sleep(0.1)
    raise BootTestError(f"the chrooted sshd never accepted a login:\n{tail(sshd_log.read_text())}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()  # the sshd this module started, by its PID
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
