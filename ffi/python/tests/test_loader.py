"""Loading libweft.so: where it is found, what a missing, broken or mismatched library says, and
that `import weft` never imports torch. Loader failures run in child processes (a process loads
the library once)."""
import json
import sys
from pathlib import Path

import pytest

import weft
from weft import _native
from support import PACKAGE, REPO, have_cc, run_python

PROBE = """
import json, sys
try:
    import weft
    print(json.dumps({"ok": True, "torch": "torch" in sys.modules}))
except Exception as e:
    print(json.dumps({"name": type(e).__name__, "code": getattr(e, "code", None), "message": str(e),
                      "import_error": isinstance(e, ImportError)}))
"""


def probe(env=None) -> dict:
    r = run_python(PROBE, env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_loads_the_library_and_not_torch():
    r = probe()
    assert r == {"ok": True, "torch": False}


def test_the_build_output_is_the_default_candidate():
    assert _native.library_candidates()[0] == REPO / "build" / "libweft.so"
    assert Path(weft.runtime_versions()["library"]).resolve() == Path(_native.native().path).resolve()


def test_the_loaded_library_has_this_packages_abi_version():
    assert weft.runtime_versions()["abi"] == weft.ABI_VERSION == _native.ABI_VERSION


def test_a_missing_library_says_where_it_looked_and_how_to_fix_it():
    r = probe({"WEFT_LIBRARY": "/nonexistent/libweft.so"})
    assert r["name"] == "LibraryError" and r["code"] == "E_LIBRARY_MISSING" and r["import_error"]
    assert "/nonexistent/libweft.so" in r["message"] and "WEFT_LIBRARY" in r["message"]


def test_a_file_that_is_not_a_library_is_a_load_error():
    r = probe({"WEFT_LIBRARY": str(PACKAGE / "pyproject.toml")})
    assert r["name"] == "LibraryError" and r["code"] == "E_LIBRARY_LOAD"
    assert "npm run build" in r["message"]


@pytest.mark.skipif(not have_cc(), reason="needs a C compiler (cc) to build a stand-in library")
def test_a_library_with_another_abi_version_is_refused(tmp_path):
    # A stand-in that exports every symbol of the table, whose weft_abi_version reports 999.
    body = []
    for name in _native.SYMBOLS:
        if name == "weft_abi_version":
            body.append(f"int {name}(int* v) {{ *v = 999; return 0; }}")
        elif name == "weft_last_error":
            body.append(f'const char* {name}(void) {{ return ""; }}')
        else:
            body.append(f"int {name}(void) {{ return 0; }}")
    (tmp_path / "stub.c").write_text("\n".join(body))
    import subprocess

    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libstub.so"), str(tmp_path / "stub.c")], check=True)
    r = probe({"WEFT_LIBRARY": str(tmp_path / "libstub.so")})
    assert r["code"] == "E_ABI_MISMATCH"
    assert "999" in r["message"] and str(_native.ABI_VERSION) in r["message"]


def test_weft_torch_is_not_imported_by_weft():
    r = run_python("import sys, weft; print('weft.torch' in sys.modules)")
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


def test_trace_ffi_logs_calls_and_prints_latencies():
    r = run_python("import weft; weft.device_count()", {"WEFT_TRACE_FFI": "1"})
    assert r.returncode == 0, r.stderr
    assert "[weft ffi] weft_device_count(" in r.stderr and "per-symbol latency" in r.stderr


@pytest.mark.skipif(sys.version_info < (3, 8), reason="pip needs Python 3.8+")
def test_the_package_builds_as_a_wheel_without_an_index(tmp_path):
    # The in-tree backend needs nothing from an index: build the wheel exactly as pip would.
    code = (f"import sys; sys.path.insert(0, {str(PACKAGE / '_backend')!r}); import weft_build; "
            f"print(weft_build.build_wheel({str(tmp_path)!r}))")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    import zipfile

    names = zipfile.ZipFile(tmp_path / r.stdout.strip()).namelist()
    assert "weft/__init__.py" in names and "weft/torch/_ops.py" in names and "weft/_where.py" in names
    assert any(n.endswith(".dist-info/RECORD") for n in names)


LATE = ("import sys, types, warnings; warnings.simplefilter('always'); t = types.ModuleType('torch'); "
        "t.cuda = types.SimpleNamespace(is_initialized=lambda: True); sys.modules['torch'] = t; import weft")


def test_importing_weft_after_torch_initialized_cuda_warns():
    import os

    if "CUDA_DEVICE_MAX_CONNECTIONS" in os.environ:
        pytest.skip("CUDA_DEVICE_MAX_CONNECTIONS is set in this environment: there is nothing to warn about")
    r = run_python(LATE)
    assert r.returncode == 0 and "came too late" in r.stderr, r.stderr
    r = run_python(LATE, {"CUDA_DEVICE_MAX_CONNECTIONS": "8"})  # the user's own choice: no warning
    assert r.returncode == 0 and "came too late" not in r.stderr, r.stderr
