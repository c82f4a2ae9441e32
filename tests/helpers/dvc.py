"""Reading a DVC workspace for the remote tests: its outputs, their cache objects, and DVC's transfer
counts."""

import contextlib
import re
from pathlib import Path

import yaml

# The outputs dvc.yaml keeps in git (cache: false): never pushed or pulled, a clone has them from git.
IN_GIT = {"results/metrics"}


def lock_outputs(root: Path) -> dict[str, str]:
    """Every output path in dvc.lock that DVC's cache holds, with its md5 (a folder's ends in .dir)."""
    stages = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    return {
        out["path"]: out["md5"]
        for stage in stages.values()
        for out in stage.get("outs", [])
        if out["path"] not in IN_GIT
    }


def output_files(root: Path) -> list[Path]:
    """The files under every output in dvc.lock, a folder's files one by one."""
    files = []
    for path in lock_outputs(root):
        target = root / path
        files += sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
    return files


def output_mtimes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in output_files(root)}


def cache_object(root: Path, md5: str) -> Path:
    """Where DVC 3 keeps an object in the workspace's own cache."""
    return root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def remote_objects(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file())


def transfer_counts(output: str) -> dict[str, int]:
    """DVC's summary line ("12 files pushed", "3 files fetched and 1 file added") as {"pushed": 12, ...}."""
    return {
        verb: int(n)
        for n, verb in re.findall(r"(\d+) files? (pushed|fetched|added|modified|deleted)", output)
    }


def s3_remote_commands(url: str, endpoint: str) -> list[list[str]]:
    """The commands of docs/remote.md for an S3 remote named s3, kept to this checkout (--local), plus the
    endpoint of a local server and its dummy credentials."""
    local = ["dvc", "remote", "modify", "--local", "s3"]
    return [
        ["dvc", "remote", "add", "--local", "s3", url],
        local + ["endpointurl", endpoint],
        local + ["region", "us-east-1"],
        local + ["access_key_id", "testing"],
        local + ["secret_access_key", "testing"],
    ]


@contextlib.contextmanager
def moto_s3(bucket: str):
    """A local S3 server with one empty bucket; yields its endpoint url."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket=bucket)
        yield endpoint
    finally:
        server.stop()
