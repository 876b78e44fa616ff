"""Writes a container image without a registry or a container builder: one
layer of the given files, in the archive format `docker save` writes, which
`ctr images import` reads.

    python3 make_image.py NAME:TAG OUT.tar --file SRC:DEST [--file ...]
                          [--link TARGET:DEST ...] [--env KEY=VALUE ...] [--cmd ARG ...]

Files keep their mode (a symbolic link SRC is followed); DEST is a path
inside the image. Directories on the
way are created. The image is for linux/amd64 (the host's architecture is
not checked: the files are the host's own binaries).
"""
import argparse
import hashlib
import io
import json
import os
import platform
import tarfile


def layer_bytes(files, links):
    buf = io.BytesIO()
    dirs = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add_dirs(dest):
            parts = dest.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
        for src, dest in files:
            add_dirs(dest)
            info = tar.gettarinfo(os.path.realpath(src), arcname=dest.strip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(src, "rb") as f:
                tar.addfile(info, f)
        for target, dest in links:
            add_dirs(dest)
            info = tarfile.TarInfo(dest.strip("/"))
            info.type = tarfile.SYMTYPE
            info.linkname = target
            info.mode = 0o777
            tar.addfile(info)
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name")
    ap.add_argument("out")
    ap.add_argument("--file", action="append", default=[], metavar="SRC:DEST")
    ap.add_argument("--link", action="append", default=[], metavar="TARGET:DEST")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--cmd", nargs="+", default=[])
    args = ap.parse_args()
    if ":" not in args.name:
        ap.error("NAME must have a tag (name:tag)")
    files = [tuple(f.split(":", 1)) for f in args.file]
    links = [tuple(l.split(":", 1)) for l in args.link]
    for src, _ in files:
        if not os.path.isfile(src):
            ap.error(f"{src}: no such file")
    layer = layer_bytes(files, links)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    config = json.dumps({
        "architecture": arch, "os": "linux",
        "config": {"Cmd": args.cmd, "Env": ["PATH=/bin:/usr/bin:/sbin:/usr/sbin"] + args.env},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "tests/e2e/node/make_image.py"}],
    }, sort_keys=True).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    layer_name = diff_id.split(":")[1] + "/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [args.name],
                            "Layers": [layer_name]}]).encode()
    with tarfile.open(args.out, "w") as tar:
        for name, data in ((config_name, config), (layer_name, layer),
                           ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    main()
