"""Write a root filesystem (a tar file) as a one-layer OCI image archive that
`ctr -n k8s.io images import` loads: no registry and no container engine needed.

    python3 oci_archive.py ROOTFS.tar NAME:TAG OUT.tar [--entrypoint ARG ...] [--env K=V ...]

The layer is the tar itself, gzip-compressed; its diff id is the digest of the tar, its
blob's digest that of the gzip. index.json names the image twice, as containerd reads
it (`io.containerd.image.name`) and as the OCI spec does (`org.opencontainers.image.ref.name`).
The image's digest (of its manifest) is printed: the pods' status shows it, and a run
records it.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import shutil
import tarfile
import tempfile
import time
from pathlib import Path


def _digest_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return "sha256:" + h.hexdigest(), size


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def write_archive(rootfs: Path, name: str, out: Path, entrypoint: list[str], env: list[str]) -> str:
    """The archive at ``out``; returns the manifest's digest."""
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        layer = Path(tmp) / "layer.tar.gz"
        diff_id, _ = _digest_file(rootfs)
        # mtime 0: the same root filesystem gives the same blob
        with (
            rootfs.open("rb") as src,
            layer.open("wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz,
        ):
            shutil.copyfileobj(src, gz, 1 << 20)
        layer_digest, layer_size = _digest_file(layer)
        config = {
            "architecture": "amd64",
            "os": "linux",
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "config": {"Env": env, "Entrypoint": entrypoint or None, "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created_by": "pgfsbench scripts/k8s (mmdebstrap)"}],
        }
        config_digest, config_bytes = _blob(json.dumps(config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": len(config_bytes),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": layer_digest,
                    "size": layer_size,
                }
            ],
        }
        manifest_digest, manifest_bytes = _blob(json.dumps(manifest, sort_keys=True).encode())
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": manifest_digest,
                    "size": len(manifest_bytes),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
        partial = out.with_suffix(".partial")
        with tarfile.open(partial, "w") as tar:

            def add_bytes(path: str, data: bytes) -> None:
                info = tarfile.TarInfo(path)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))

            add_bytes("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
            add_bytes("index.json", json.dumps(index).encode())
            add_bytes(f"blobs/sha256/{manifest_digest[7:]}", manifest_bytes)
            add_bytes(f"blobs/sha256/{config_digest[7:]}", config_bytes)
            tar.add(layer, arcname=f"blobs/sha256/{layer_digest[7:]}")
        partial.replace(out)
    return manifest_digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rootfs", type=Path)
    parser.add_argument("name")
    parser.add_argument("out", type=Path)
    parser.add_argument("--entrypoint", nargs="*", default=[])
    path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    parser.add_argument("--env", action="append", default=[path])
    args = parser.parse_args()
    print(write_archive(args.rootfs, args.name, args.out, args.entrypoint, args.env))


if __name__ == "__main__":
    main()
