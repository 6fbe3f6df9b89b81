"""An in-tree PEP 517 / PEP 660 build backend for the weft package, so that `pip install ./ffi/python`
needs nothing from a package index (the GPU hosts have no network). It packs weft/ as it is (pure
Python) and records the checkout it was built from in weft/_where.py, so an installed weft still
finds that checkout's build/libweft.so."""
from __future__ import annotations

import base64
import hashlib
import io
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent.parent  # ffi/python
REPO_ROOT = HERE.parent.parent


def _project() -> Dict[str, str]:
    text = (HERE / "pyproject.toml").read_text()
    try:
        import tomllib  # Python 3.11+

        p = tomllib.loads(text)["project"]
        return {k: str(p[k]) for k in ("name", "version", "description", "requires-python")}
    except ImportError:  # the few string keys used here, read from the [project] table
        table = text.split("[project]", 1)[1].split("\n[", 1)[0]
        return {k: re.search(rf'^{k}\s*=\s*"([^"]*)"', table, re.M).group(1)
                for k in ("name", "version", "description", "requires-python")}


def _metadata() -> str:
    p = _project()
    return (f"Metadata-Version: 2.1\nName: {p['name']}\nVersion: {p['version']}\nSummary: {p['description']}\n"
            f"Requires-Python: {p['requires-python']}\nLicense: Apache-2.0\nProvides-Extra: torch\n"
            "Requires-Dist: torch>=2.4; extra == \"torch\"\n")


def _dist_info() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}.dist-info"


def _wheel_name() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}-py3-none-any.whl"


def _write_wheel(directory: str, files: Dict[str, bytes]) -> str:
    info = _dist_info()
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata().encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: weft_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{info}/top_level.txt"] = b"weft\n"
    record: List[str] = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = Path(directory) / _wheel_name()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path.name


def _sources() -> Dict[str, bytes]:
    out = {}
    for f in sorted((HERE / "weft").rglob("*.py")):
        rel = f.relative_to(HERE).as_posix()
        if rel != "weft/_where.py":
            out[rel] = f.read_bytes()
    out["weft/_where.py"] = (f'"""Written by the build backend: the checkout this wheel came from."""\n'
                             f"REPO_ROOT = {str(REPO_ROOT)!r}\n").encode()
    return out


# ---- PEP 517 ------------------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, _sources())


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    # A .pth that puts ffi/python on sys.path: the package is imported from the checkout itself.
    return _write_wheel(wheel_directory, {"weft_editable.pth": f"{HERE}\n".encode()})


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    p = _project()
    base = f"{p['name']}-{p['version']}"
    path = Path(sdist_directory) / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for f in [HERE / "pyproject.toml", *sorted((HERE / "_backend").glob("*.py")), *sorted((HERE / "weft").rglob("*.py"))]:
            if f.name != "_where.py":
                tar.add(f, arcname=f"{base}/{f.relative_to(HERE).as_posix()}")
        meta = _metadata().encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(meta)
        tar.addfile(ti, io.BytesIO(meta))
    return path.name
