"""The package's layers (docs/architecture.rst): every import of zaqar_lite points down.

Read from the source with :mod:`ast`, so an import added anywhere (inside a
function too) is seen. A module may import modules of its own layer and of the
layers below it, never of a layer above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "zaqar_lite"

#: layer of each package (or top-level module) of zaqar_lite, lowest first (docs/architecture.rst)
LAYERS: dict[str, int] = {
    "": 0,  # the package's __init__ (its version)
    "models": 0, "errors": 0, "config": 0, "clock": 0, "metrics": 0, "jsontext": 0,
    "claims": 1, "rules": 1,
    "storage": 2,
    "notify": 3,
    "service": 4,
    "api": 5,
    "server": 6, "cli": 6, "__main__": 6,
}


def module_name(path: Path) -> str:
    """``zaqar_lite/storage/redis/driver.py`` -> ``zaqar_lite.storage.redis.driver``."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    """The top-level part of the package a module belongs to (``zaqar_lite.storage.base`` -> ``storage``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def is_module(name: str) -> bool:
    """Whether ``zaqar_lite.<name>`` is a module or a package (not a name defined in its __init__)."""
    return (PACKAGE / f"{name}.py").exists() or (PACKAGE / name).is_dir()


def imported(path: Path) -> set[str]:
    """The zaqar_lite modules (or names imported from them) a source file imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "zaqar_lite":  # a module of the package, or a name of its __init__
                found.update(f"zaqar_lite.{alias.name}" if is_module(alias.name) else "zaqar_lite"
                             for alias in node.names)
            elif node.module.startswith("zaqar_lite."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("zaqar_lite."))
    return found


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def test_every_part_has_a_layer():
    parts = {part_of(module_name(p)) for p in SOURCES}
    assert parts - set(LAYERS) == set(), "add the new part of the package to LAYERS and docs/architecture.rst"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    own = part_of(module_name(path))
    upward = sorted(m for m in imported(path)
                    if LAYERS[part_of(m)] > LAYERS[own])
    assert upward == [], f"{own} (layer {LAYERS[own]}) imports from a layer above: {upward}"


def test_drivers_do_not_import_each_other():
    for path in (PACKAGE / "storage").glob("*/*.py"):
        driver = path.parent.name
        # forwarding: the base of a wrapping store; contexts: the lean context manager of transactions
        shared = (driver, "base", "cache", "forwarding", "contexts")
        others = sorted(m for m in imported(path)
                        if m.startswith("zaqar_lite.storage.") and m.split(".")[2] not in shared)
        assert others == [], f"{path.relative_to(PACKAGE)} imports another driver: {others}"


@pytest.mark.parametrize("package", ["claims", "rules"])
def test_the_rules_know_no_store(package):
    for path in (PACKAGE / package).glob("*.py"):
        stores = sorted(m for m in imported(path) if part_of(m) in ("storage", "notify", "service", "api"))
        assert stores == [], f"{path.relative_to(PACKAGE)} imports {stores}"


#: the most lines a module of storage/ may have (docs/architecture.rst, "Storage")
STORAGE_MODULE_LINES = 450


def test_storage_modules_stay_small():
    for path in sorted((PACKAGE / "storage").rglob("*.py")):
        lines = len(path.read_text().splitlines())
        assert lines < STORAGE_MODULE_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines"
