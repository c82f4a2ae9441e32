"""A real single-node Slurm for the tests: munged, slurmctld and slurmd, all in one temporary folder.

The node is this host (its CPUs, a little less than its memory) with a count-only GRES of fake GPUs, so
jobs that ask for `--gpus` are scheduled as on a GPU cluster; the jobs themselves see no GPU and run on the
CPU. Nothing outside the folder is touched: the munge key, socket, Slurm's config, state, spool, logs and
pid files all live in it, and clients find the cluster through SLURM_CONF. Accounting is off, as on a
cluster without slurmdbd; finished jobs stay visible to `squeue` for MinJobAge.

    cluster = start_cluster(folder)      # raises ClusterUnavailable with the reason (and daemon log tail)
    try: ... subprocess.run(["sbatch", ...], env=cluster.env(os.environ)) ...
    finally: cluster.stop()
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sinfo", "sbatch", "squeue", "scontrol", "scancel", "srun")
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
# Long enough for `squeue --states=all` to still list the first job of a long run at its end.
MIN_JOB_AGE_S = 7200


class ClusterUnavailable(RuntimeError):
    """Slurm cannot run here; the message says why (a missing binary, or a daemon's log tail)."""


@dataclass
class SlurmCluster:
    root: Path
    partition: str
    node: str
    cpus: int
    memory_mb: int
    gpus: int
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def env(self, base: dict | None = None) -> dict:
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", ""), *SBIN])
        return env

    def sacct_calls(self) -> list[str]:
        """The argument lines of every sacct run through this cluster's PATH."""
        log = self.root / "sacct-calls.log"
        return log.read_text().splitlines() if log.is_file() else []

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env=self.env(), capture_output=True, text=True, timeout=timeout)

    def log_tail(self, lines: int = 15) -> str:
        """The end of each daemon's log file, or of its output where it wrote no log (it failed early)."""
        tails = []
        for daemon in DAEMONS:
            for path in (self.root / f"{daemon}.log", self.root / f"{daemon}.out"):
                if path.is_file() and path.stat().st_size:
                    text = path.read_text(errors="replace").splitlines()[-lines:]
                    tails.append(f"--- {path.name}\n" + "\n".join(text))
                    break
        return "\n".join(tails) or "(no daemon wrote a log)"

    def stop(self) -> None:
        """Cancel the jobs left (a failed run's), then stop the daemons this cluster started, by their pids,
        the last started first."""
        if self.processes.get("slurmctld") and self.processes["slurmctld"].poll() is None:
            try:
                self.run("scancel", "--partition", self.partition)
            except (OSError, subprocess.SubprocessError):
                pass  # the daemons go down below all the same
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
        self.processes.clear()


def find(binary: str) -> str | None:
    return shutil.which(binary) or shutil.which(binary, path=os.pathsep.join(SBIN))


def missing_binaries() -> list[str]:
    return [name for name in DAEMONS + CLIENTS if find(name) is None]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise ClusterUnavailable("cannot read the memory size from /proc/meminfo")


def _write_config(cluster: SlurmCluster) -> None:
    root, user = cluster.root, getpass.getuser()
    ctld_port, slurmd_port = _free_port(), _free_port()
    (cluster.root / "slurm.conf").write_text(f"""\
ClusterName=vlmgrid-test
SlurmctldHost={cluster.node}(127.0.0.1)
SlurmUser={user}
SlurmdUser={user}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MinJobAge={MIN_JOB_AGE_S}
SchedulerParameters=sched_interval=2
GresTypes=gpu
NodeName={cluster.node} NodeAddr=127.0.0.1 CPUs={cluster.cpus} RealMemory={cluster.memory_mb} \
Gres=gpu:{cluster.gpus} State=UNKNOWN
PartitionName={cluster.partition} Nodes={cluster.node} Default=NO MaxTime=INFINITE State=UP
""")
    # Empty files stand in for the device files: the scheduler counts these GPUs, the jobs never use one.
    for index in range(cluster.gpus):
        (root / f"fake-gpu{index}").touch()
    files = f"{root}/fake-gpu[0-{cluster.gpus - 1}]" if cluster.gpus > 1 else f"{root}/fake-gpu0"
    (root / "gres.conf").write_text(f"NodeName={cluster.node} Name=gpu File={files}\n")


def _write_wrappers(cluster: SlurmCluster) -> None:
    """srun that finds this cluster, and sacct that leaves a trace, first on the jobs' PATH.

    Snakemake's job step drops SLURM_CONF from the environment of the srun it runs inside each job (a
    real cluster's nodes have their config at the standard path), so srun gets it from its wrapper.
    """
    cluster.bin.mkdir(exist_ok=True)
    wrappers = {
        "srun": f'SLURM_CONF={cluster.conf} exec {find("srun")} "$@"\n',
        "sacct": f'echo "$*" >> {cluster.root}/sacct-calls.log\nexec {find("sacct") or "false"} "$@"\n',
    }
    for name, body in wrappers.items():
        path = cluster.bin / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)


def _start(cluster: SlurmCluster, name: str, args: list[str]) -> None:
    out = open(cluster.root / f"{name}.out", "w")
    try:
        cluster.processes[name] = subprocess.Popen(
            [find(name), *args],
            env=cluster.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        out.close()


def _wait(cluster: SlurmCluster, what: str, ready, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, process in cluster.processes.items():
            if process.poll() is not None:
                raise ClusterUnavailable(
                    f"{name} exited with status {process.returncode} while waiting for "
                    f"{what}:\n{cluster.log_tail()}"
                )
        if ready():
            return
        time.sleep(0.5)
    raise ClusterUnavailable(f"{what} did not happen within {timeout:.0f} s:\n{cluster.log_tail()}")


def _node_state(cluster: SlurmCluster) -> str:
    result = cluster.run("sinfo", "--noheader", "--partition", cluster.partition, "--Node", "--format=%t")
    return result.stdout.strip() if result.returncode == 0 else ""


def start_cluster(
    root: Path, partition: str = "vlmgrid-test", gpus: int = 2, timeout: float = 60
) -> SlurmCluster:
    """Start munged, slurmctld and slurmd under `root`; return once `sinfo` shows the node idle."""
    missing = missing_binaries()
    if missing:
        raise ClusterUnavailable(
            f"Slurm is not installed here (missing: {', '.join(missing)}); "
            "install the Debian packages slurm-wlm and munge"
        )
    root = Path(root)
    for folder in ("state", "spool"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    # Slurm rejects a node that has less memory than it claims, so claim a little less than there is.
    cluster = SlurmCluster(
        root=root,
        partition=partition,
        node=socket.gethostname().split(".")[0],
        cpus=os.cpu_count() or 1,
        memory_mb=int(_memory_mb() * 0.9),
        gpus=gpus,
    )
    _write_config(cluster)
    _write_wrappers(cluster)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    try:
        _start(
            cluster,
            "munged",
            [
                "--foreground",
                "--force",
                f"--socket={root}/munge.socket",
                f"--key-file={key}",
                f"--log-file={root}/munged.log",
                f"--pid-file={root}/munged.pid",
                f"--seed-file={root}/munged.seed",
            ],
        )
        _wait(cluster, "munged's socket", (root / "munge.socket").exists, timeout)
        _start(cluster, "slurmctld", ["-D", "-i", "-f", str(cluster.conf)])
        _wait(
            cluster, "slurmctld to answer", lambda: cluster.run("scontrol", "ping").returncode == 0, timeout
        )
        _start(cluster, "slurmd", ["-D", "-f", str(cluster.conf), "-N", cluster.node])
        _wait(cluster, f"node {cluster.node} to be idle", lambda: _node_state(cluster) == "idle", timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster
