"""Records: run directories, manifests, atomic writes and every table schema; the layers meet on disk here."""

from archline.records.rundir import (
    MANIFEST_NAME,
    RUN_SCHEMA,
    SCHEMA_VERSION,
    Manifest,
    RunDir,
    RunStatus,
    atomic_open,
    atomic_write_bytes,
    atomic_write_text,
    package_versions,
    read_csv,
    to_jsonable,
    write_csv,
    write_json,
)

__all__ = [
    "MANIFEST_NAME",
    "RUN_SCHEMA",
    "SCHEMA_VERSION",
    "Manifest",
    "RunDir",
    "RunStatus",
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_text",
    "package_versions",
    "read_csv",
    "to_jsonable",
    "write_csv",
    "write_json",
]
