"""Advice turned into a spec: the configuration found against the recommended alternatives,
on the same kind of storage, sized to the free space of the work directory, so the advice
is measured on the user's own hardware before it is adopted.

Input is the doctor's JSON (its findings and facts) or just a filesystem named on the
command line. The output is a dict ready for TOML; `pgfsbench plan` validates it like any
spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgfsbench.advisor.facts import PG_DEFAULTS as DEFAULTS
from pgfsbench.jsonish import Table, arr, obj, objs, text, whole
from pgfsbench.spec.kinds import host_fstypes, storage_kind
from pgfsbench.spec.sizes import PGBENCH_BYTES_PER_SCALE, room_needed
from pgfsbench.units import human_bytes

# the builtin pgbench scripts `advise` writes a spec for (seqscan measures reads only)
ADVISED_WORKLOADS = ("tpcb-like", "simple-update", "select-only")

GiB = 1 << 30
WARMUP_S = 10.0  # each advised run's warm-up
BYTES_PER_SCALE = PGBENCH_BYTES_PER_SCALE  # spec/sizes.py: the plan's own estimate
# mount options a benchmark should carry over from the live filesystem (the rest are
# the kernel's defaults or describe this particular mount)
CARRIED_OPTIONS = (
    "barrier=0",
    "nobarrier",
    "barrier=off",
    "data=writeback",
    "data=journal",
    "noatime",
    "strictatime",
    "lazytime",
    "nodatacow",
    "nodatasum",
)
UNSAFE_OPTIONS = (
    "barrier=0",
    "nobarrier",
    "barrier=off",
    "data=writeback",
    "strictatime",
    "nodatasum",
)
CARRIED_ZFS = ("recordsize", "compression", "primarycache", "logbias", "atime", "sync")
COMPRESSION = {"kernel": "lz4", "fuse": "lzjb"}  # what each ZFS has that is cheap
# the settings a doctor's JSON from before `non_default` carried over
LEGACY_KEPT = (
    "full_page_writes",
    "wal_init_zero",
    "wal_recycle",
    "fsync",
    "synchronous_commit",
    "max_wal_size",
    "checkpoint_timeout",
    "shared_buffers",
)


@dataclass(frozen=True)
class Advice:
    spec: Table
    reasons: list[str]  # why each alternative is in the matrix
    sizes: list[str] = field(default_factory=list)  # how the scale and the devices were sized
    left_out: list[str] = field(default_factory=list)  # today's settings not copied, and why


Fired = dict[str, list[Table]]  # the doctor's findings by rule id


def _fired(doctor: Table) -> Fired:
    out: Fired = {}
    for f in objs(doctor.get("findings")):
        if f.get("severity") in ("WARN", "BAD"):
            out.setdefault(text(f.get("rule")), []).append(f)
    return out


def _data_path(doctor: Table) -> Table | None:
    paths = objs(obj(doctor.get("facts")).get("paths"))
    for p in paths:
        if p.get("role") == "data directory":
            return p
    return paths[0] if paths else None


def device_size(free_bytes: int | None, devices: int = 1) -> int:
    """A loop file size that leaves the work directory's filesystem half free: between
    1 GiB and 16 GiB, per device of the storage."""
    if free_bytes is None:
        return 4 * GiB
    size = free_bytes // 2 // max(1, devices)
    return max(1 * GiB, min(16 * GiB, size // GiB * GiB))


def fitting_scale(size: int, ram_bytes: int | None) -> int:
    """A pgbench scale whose data takes about 40% of the device (the load's WAL and the
    run's growth take the rest), at most 100 and at most a quarter of RAM."""
    scale = int(size * 0.4 // BYTES_PER_SCALE)
    if ram_bytes:
        scale = min(scale, int(ram_bytes * 0.25 // BYTES_PER_SCALE))
    return max(1, min(100, scale))


def _size_text(n: int) -> str:
    return f"{n // GiB}G" if n % GiB == 0 else f"{n // (1 << 20)}M"


def _storage_from_path(fs: str, path: Table | None, size: str, zfs_kind: str) -> Table:
    if fs == "tmpfs":
        return {"fs": "tmpfs", "size": size}
    if fs == "zfs":
        props = {k: v for k, v in obj((path or {}).get("zfs")).items() if k in CARRIED_ZFS}
        if "recordsize" in props and str(props["recordsize"]).isdigit():
            props["recordsize"] = f"{int(str(props['recordsize'])) // 1024}K"
        return {
            "fs": "zfs",
            "implementation": zfs_kind if zfs_kind in ("kernel", "fuse") else "any",
            "pool": {"devices": [f"loop:{size}"]},
            "data": {"properties": props},
        }
    found = arr(obj((path or {}).get("mount")).get("options"))
    opts = [o for o in found if isinstance(o, str) and o in CARRIED_OPTIONS]
    storage: Table = {"fs": fs, "device": f"loop:{size}"}
    if opts:
        storage["mount_options"] = opts
    return storage


@dataclass(frozen=True)
class Sizing:
    """The scale a spec asks for and the room it needs: one estimate, the plan's own
    (pgbench's bytes a scale unit, plan.py's headroom for the load's WAL)."""

    scale: int
    data_bytes: int
    room_bytes: int
    device_bytes: int
    why: str


def room_for(scale: int, fs: str) -> tuple[int, int]:
    """(data, room) of pgbench at ``scale`` on ``fs``, as `plan` computes them."""
    data = scale * BYTES_PER_SCALE
    return data, room_needed(data, storage_kind(fs).space_headroom)


def sizing(
    fs: str,
    scale: int | None,
    databases: list[tuple[str, int]],
    free_bytes: int | None,
    ram: int | None,
    workdir: str,
) -> Sizing:
    """The scale: as asked, else the server's databases' size, else what fits the work
    directory; the loop device: the room it needs, rounded up to GiB (a quarter more for
    the run's own growth). A scale that cannot fit the work directory's free space is
    brought down to one that does, and said."""
    total = sum(b for _, b in databases)
    if scale is not None:
        chosen, why = scale, f"scale {scale} as asked"
    elif total:
        chosen = max(1, -(-total // BYTES_PER_SCALE))
        largest = databases[0]
        why = (
            f"scale {chosen}: your databases hold {human_bytes(total)} (the largest, "
            f"{largest[0]!r}, {human_bytes(largest[1])}), as much pgbench data"
        )
    else:
        chosen = fitting_scale(device_size(free_bytes), ram)
        why = f"scale {chosen}: what fits the work directory (no server's database was measured)"
    data, room = room_for(chosen, fs)
    budget = None if free_bytes is None else int(free_bytes * 0.8)
    if budget is not None and room > budget:
        fitted = chosen
        while fitted > 1 and room_for(fitted, fs)[1] > budget:
            fitted = max(1, fitted * 9 // 10)
        why += (
            f"; brought down to scale {fitted}: {workdir} has {human_bytes(free_bytes)} free, "
            f"scale {chosen} needs {human_bytes(room)} (give --workdir on a disk with room "
            "to measure at your size)"
        )
        chosen = fitted
        data, room = room_for(chosen, fs)
    device = max(GiB, -(-(room * 5 // 4) // GiB) * GiB)
    return Sizing(chosen, data, room, device, why)


def _databases(facts: Table) -> list[tuple[str, int]]:
    out = []
    for row in arr(obj(obj(facts.get("postgresql")).get("evidence")).get("databases")):
        if isinstance(row, list | tuple) and len(row) == 2 and isinstance(row[1], int):
            out.append((str(row[0]), int(row[1])))
    return sorted(out, key=lambda r: -r[1])


def advise(
    doctor: Table | None,
    fs: str | None,
    free_bytes: int | None,
    scale: int | None = None,
    workload: str = "tpcb-like",
    duration: str = "60s",
    repetitions: int | str = 3,
    tries: list[str] | None = None,
    workdir: str = "/var/tmp/pgfsbench",
    budget: str | None = None,
) -> Advice:
    """A spec comparing what the doctor found (or the named filesystem's defaults) with the
    recommended alternatives and the ones asked for (``tries``: SETTING=VALUE)."""
    doctor = doctor or {}
    facts = obj(doctor.get("facts"))
    fired = _fired(doctor)
    path = _data_path(doctor)
    fs = fs or text((path or {}).get("fstype")) or "ext4"
    if fs not in host_fstypes():
        fs = "ext4"  # a filesystem we cannot make (nfs, overlay): compare on the default
    zfs_kind = text(obj(facts.get("zfs")).get("kind")) or "any"
    ram = whole(obj(facts.get("host")).get("memory_bytes"))
    sized = sizing(fs, scale, _databases(facts), free_bytes, ram, workdir)
    size = _size_text(sized.device_bytes)
    reasons: list[str] = []
    storage: dict[str, Table] = {}
    # tmpfs takes RAM, not disk: at most a quarter of the machine's memory
    ram_quarter = ram // 4 // GiB * GiB if ram else 4 * GiB
    current = _storage_from_path(
        fs,
        path,
        _size_text(max(GiB, min(sized.device_bytes, ram_quarter))) if fs == "tmpfs" else size,
        zfs_kind,
    )
    today = f"{fs}-today"
    storage[today] = current

    storage.update(_storage_alternatives(fs, current, zfs_kind, size, reasons))
    postgres, left_out = _postgres_alternatives(facts, fired, fs, ram, reasons, tries or [])
    kernel = _kernel_alternatives(facts, fired, reasons)
    idle = _dirty_limits_idle(postgres["settings-today"], sized.data_bytes, duration)
    if idle and obj(kernel.get("kernel-recommended")).get("sysctl"):
        # the runs could not tell these kernels apart (plan would only warn so): not asked
        for name in ("kernel-today", "kernel-recommended"):
            kernel[name].pop("sysctl", None)
        reasons[:] = [r for r in reasons if not r.startswith("vm.dirty_background_bytes")]
        reasons.append(f"vm.dirty_* left as found: {idle}")
        if not kernel["kernel-recommended"]:  # nothing else (huge pages) to compare
            kernel = {}
    spec: Table = {
        "name": f"advise-{fs}",
        "description": (
            f"pgfsbench advise: {fs} as found against the recommended "
            f"alternatives, on {size} loop devices under {workdir} (scale {sized.scale}: "
            f"about {human_bytes(sized.data_bytes)} of data, "
            f"{human_bytes(sized.room_bytes)} of room with the load's WAL)"
        ),
        # the loop files go here: `plan` and `run` take it unless --workdir says otherwise
        "workdir": workdir,
        "defaults": {
            "scale": sized.scale,
            "clients": 8,
            "threads": 2,
            "duration": duration,
            "warmup": f"{WARMUP_S:.0f}s",
            "repetitions": repetitions,
            **({"budget": budget} if budget else {}),
        },
        "storage": storage,
        "postgres": postgres,
        "workload": {workload: {"builtin": workload}},
    }
    if kernel:
        spec["kernel"] = kernel
    if not reasons:
        reasons.append(
            "nothing to change was found: the configuration as found, to keep as a baseline"
        )
    return Advice(spec, reasons, [sized.why], left_out)


def _storage_alternatives(
    fs: str, current: Table, zfs_kind: str, size: str, reasons: list[str]
) -> dict[str, Table]:
    """The storage configurations to run against the one found."""
    storage: dict[str, Table] = {}
    if fs == "tmpfs":
        for alt in ("ext4", "xfs"):
            storage[alt] = {"fs": alt, "device": f"loop:{size}"}
        reasons.append("tmpfs is not durable: ext4 and xfs on a disk, against tmpfs as the ceiling")
    elif fs == "zfs":
        comp: object = COMPRESSION.get(zfs_kind, COMPRESSION)
        base = obj(obj(current.get("data")).get("properties"))
        for rs in ("8K", "16K", "32K"):
            props = {**base, "recordsize": rs, "compression": comp}
            if props.get("primarycache") in ("metadata", "none"):
                props["primarycache"] = "all"
            if props.get("sync") == "disabled":
                props["sync"] = "standard"
            storage[f"rs{rs.lower()}-compressed"] = {**current, "data": {"properties": props}}
        reasons.append(
            "ZFS: recordsize 8K/16K/32K with compression (primarycache=all, "
            "sync=standard) against the dataset as found"
        )
    else:
        opts = [text(o) for o in arr(current.get("mount_options"))]
        safe = [o for o in opts if o not in UNSAFE_OPTIONS]
        if safe != opts:
            storage[f"{fs}-safe-options"] = (
                {**current, "mount_options": safe}
                if safe
                else {k: v for k, v in current.items() if k != "mount_options"}
            )
            reasons.append(
                f"mount options without {', '.join(o for o in opts if o not in safe)}"
                " (the cost of safety, measured)"
            )
        if "noatime" not in opts and storage_kind(fs).mkfs:
            storage[f"{fs}-noatime"] = {**current, "mount_options": [*safe, "noatime"]}
            reasons.append("noatime against the default relatime")
    return storage


def _postgres_alternatives(
    facts: Table, fired: Fired, fs: str, ram: int | None, reasons: list[str], tries: list[str]
) -> tuple[dict[str, Table], list[str]]:
    """PostgreSQL's settings as found (every one not at its default that shapes what the
    storage sees), the alternatives the findings call for and those asked for; with the
    lines that say which of today's settings were left out, and why."""
    from pgfsbench.advisor.baseline import baseline, tried

    pg = obj(facts.get("postgresql"))
    settings = {k: text(v) for k, v in obj(pg.get("settings")).items()}
    non_default = {k: text(v) for k, v in obj(pg.get("non_default")).items()}
    sources = {k: text(v) for k, v in obj(pg.get("non_default_source")).items()}
    if not non_default and settings:
        # a doctor's JSON from before the server listed them: the settings the rules read
        non_default = {
            k: settings[k] for k in LEGACY_KEPT if k in settings and settings[k] != DEFAULTS.get(k)
        }
    sb = non_default.get("shared_buffers")
    found = baseline(non_default, sources, {"shared_buffers": sb is None or _fits(sb, ram)})
    kept: Table = dict(found.settings)
    postgres: dict[str, Table] = {"settings-today": {"settings": dict(kept)}}
    effective = {**DEFAULTS, **{k: text(v) for k, v in kept.items()}}
    if "fpw-off-torn-pages" in fired or "btrfs-nodatacow" in fired:
        postgres["fpw-on"] = {"settings": {**kept, "full_page_writes": "on"}}
        reasons.append("full_page_writes = on: what safety costs on this filesystem")
    elif fs == "zfs" and effective.get("full_page_writes", "on") == "on":
        postgres["fpw-off"] = {"settings": {**kept, "full_page_writes": "off"}}
        reasons.append("full_page_writes = off, safe on ZFS with recordsize >= 8K")
    if "cow-wal-init-zero" in fired or (storage_kind(fs).copy_on_write and not settings):
        postgres["no-wal-zero"] = {
            "settings": {**kept, "wal_init_zero": "off", "wal_recycle": "off"}
        }
        reasons.append("wal_init_zero and wal_recycle off on a copy-on-write filesystem")
    if "fsync-off" in fired:
        postgres["fsync-on"] = {"settings": {**kept, "fsync": "on"}}
        reasons.append("fsync = on")
    if "checkpoints-requested" in fired:
        postgres["bigger-wal"] = {"settings": {**kept, "max_wal_size": "4GB"}}
        reasons.append("max_wal_size 4GB: fewer requested checkpoints")
    for name, setting, value in tried(tries, set(settings)):
        if name in postgres:
            continue
        postgres[name] = {"settings": {**kept, setting: value}}
        now = effective.get(setting) or settings.get(setting) or "its default"
        reasons.append(f"{setting} = {value} (asked for with --try) against today's {now}")
    return postgres, found.comment()


def _kernel_alternatives(facts: Table, fired: Fired, reasons: list[str]) -> dict[str, Table]:
    """The kernel's dirty limits and huge pages as found against the recommended ones."""
    vm = obj(facts.get("vm"))
    kernel: dict[str, Table] = {}
    if "dirty-gigabytes" in fired or "thp-always" in fired:
        now: Table = {}
        rec: Table = {}
        if "dirty-gigabytes" in fired:
            for k in ("vm.dirty_background_bytes", "vm.dirty_bytes"):
                if (n := whole(vm.get(k))) is not None and n != 0:
                    now[k] = n
            for k in ("vm.dirty_background_ratio", "vm.dirty_ratio"):
                if k.replace("ratio", "bytes") not in now and (n := whole(vm.get(k))) is not None:
                    now[k] = n
            rec = {"vm.dirty_background_bytes": 64 << 20, "vm.dirty_bytes": 512 << 20}
            reasons.append(
                "vm.dirty_background_bytes 64MB / vm.dirty_bytes 512MB against "
                "the dirty limits as found"
            )
        kernel["kernel-today"] = {"sysctl": now}
        kernel["kernel-recommended"] = {"sysctl": rec}
        if "thp-always" in fired:
            kernel["kernel-today"]["transparent_hugepage"] = "always"
            kernel["kernel-recommended"]["transparent_hugepage"] = "never"
            reasons.append("transparent huge pages never against always")
    return kernel


def _dirty_limits_idle(today: Table, data_bytes: int, duration: str) -> str | None:
    """Why the kernel's dirty limits cannot change what the runs measure (None: they can):
    the data fits in shared_buffers, so the benchmark writes only WAL, fsynced at each
    commit, and no timed checkpoint falls in the window (its warm-up and measurement)."""
    from pgfsbench.units import parse_duration, parse_size

    settings = obj(today.get("settings"))

    def setting(name: str, default: str) -> str:
        return text(settings.get(name)) or default

    try:
        sb_text = setting("shared_buffers", "128MB").strip("'")
        shared = (
            int(sb_text) * 8192 if sb_text.isdigit() else parse_size(sb_text.replace("kB", "K"))
        )
        ct_text = setting("checkpoint_timeout", "5min").strip("'")
        timeout = float(ct_text) if ct_text.isdigit() else parse_duration(ct_text)
        window = parse_duration(duration) + WARMUP_S
    except ValueError:
        return None
    if data_bytes >= shared * 0.8 or window >= timeout:
        return None
    return (
        f"about {human_bytes(data_bytes)} of data fits in shared_buffers "
        f"({human_bytes(shared)}) and no timed checkpoint falls in a {window:.0f} s run "
        f"(checkpoint_timeout {timeout:.0f} s): the benchmark writes only WAL, fsynced at "
        "each commit, and the runs could not tell the limits apart (a larger --scale, or "
        "--duration past checkpoint_timeout, to measure them)"
    )


def _fits(value: str, ram: int | None) -> bool:
    from pgfsbench.units import parse_size

    try:
        n = parse_size(value.replace("kB", "K"))
    except ValueError:
        return False
    return not ram or n < ram * 0.25


def to_toml(advice: Advice) -> str:
    import tomli_w

    head = "".join(f"# {r}\n" for r in advice.reasons)
    sizes = "".join(f"# {r}\n" for r in advice.sizes)
    left = "".join(f"#   {r}\n" for r in advice.left_out)
    return (
        "# Written by `pgfsbench advise`: every alternative below is there because\n"
        + head
        + sizes
        + (
            "# settings-today copies every setting of yours that is not at its default and\n"
            "# shapes what the storage sees; the others were left out:\n" + left
            if left
            else "# settings-today copies every setting of yours that is not at its default\n"
            "# and shapes what the storage sees\n"
        )
        + "# Check it with `pgfsbench plan FILE`, run it with `pgfsbench run FILE`.\n\n"
        + tomli_w.dumps(advice.spec)
    )
