"""The shape of the package: layers import downward, GPU modules load lazily, docs cover params."""

import ast
import pathlib
import subprocess
import sys

import pytest

from dgboost.params import PARAMETERS

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dgboost"

# The layers as built (docs/architecture.md): kernels and the collective sit side by
# side on the foundations and know only them; the data layer builds its matrix with
# the kernels; faces (command line, later Dask and scikit-learn) sit on top.
LAYERS = {
    1: {"_dtypes", "_files", "_hashing", "_settings", "_version", "backend", "params", "fixed_point"},
    2: {"kernels", "collective"},
    3: {"data", "datasets"},
    4: {"objectives", "metrics", "tree", "reduce"},
    5: {"training", "replay", "callback", "booster", "interchange", "explain"},
    6: {"cli", "dask", "sklearn", "jobs", "plotting", "__init__"},
}
LAYER_OF = {module: layer for layer, modules in LAYERS.items() for module in modules}
ALLOWED = {2: {1}}  # kernels and collective know only the foundations
FORBIDDEN_IN_CORE = {"dask", "distributed", "sklearn", "cupy", "dask_cuda"}
# The Dask communicator is the collective layer's one module built on distributed; it
# loads only when a Dask job asks for it (collective/__init__.py does not import it).
DASK_COMMUNICATOR = PACKAGE / "collective" / "host.py"
# dgboost's machine settings live in Dask's config (_settings.py reads them lazily).
SETTINGS = PACKAGE / "_settings.py"


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).parts[0].removesuffix(".py"), path


def _imports(path):
    """(kind, name, at module level) of every import: dgboost modules by their top-level
    name under dgboost/, other packages by their top-level name."""
    parts = ("dgboost",) + path.relative_to(PACKAGE).with_suffix("").parts
    package = parts[:-1]  # the package a relative import starts from, also for __init__.py
    tree = ast.parse(path.read_text())
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        at_top = id(node) in top_level
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            targets = [node.module] if node.module else [alias.name for alias in node.names]
            for target in targets:
                full = base + tuple(target.split("."))
                yield "dgboost", full[1] if len(full) > 1 else "__init__", at_top
        elif isinstance(node, ast.ImportFrom):
            yield "external", node.module.split(".")[0], at_top
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield "external", alias.name.split(".")[0], at_top


@pytest.mark.parametrize("module, path", list(_modules()), ids=lambda v: str(v))
def test_imports_flow_down_the_layers(module, path):
    layer = LAYER_OF[module]
    for kind, name, at_top in _imports(path):
        if kind == "dgboost" and name != module and name in LAYER_OF:
            allowed = ALLOWED.get(layer, set(range(1, layer + 1)))
            assert LAYER_OF[name] in allowed | {layer}, f"{path.name} (layer {layer}) imports {name}"
        if kind == "external" and layer <= 5 and name != "dgboost":
            if (path == DASK_COMMUNICATOR and name == "distributed") or \
                    (path == SETTINGS and name in ("dask", "distributed") and not at_top):
                continue
            assert name not in FORBIDDEN_IN_CORE or (name == "cupy" and not at_top), \
                f"{path.name} imports {name}"
        if kind == "external" and name in ("cupy", "dask_cuda"):
            assert not at_top, f"{path.name} imports {name} at module import time"


def test_imports_without_cupy_or_dask():
    code = ("import sys; sys.modules.update(cupy=None, dask=None, distributed=None, dask_cuda=None); "
            "import dgboost, dgboost.cli, dgboost.datasets, dgboost.collective; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.stdout.strip() == "ok", result.stderr


def test_every_parameter_is_documented():
    text = (ROOT / "docs" / "parameters.md").read_text()
    for spec in PARAMETERS:
        assert f"`{spec.name}`" in text, spec.name
        for alias in spec.aliases:
            assert f"`{alias}`" in text, alias


def test_ci_runs_the_readme_test_command():
    result = subprocess.run(["awk", '/<!-- test-command -->/ {getline; while ($0 ~ /^```/) getline; print; exit}',
                             str(ROOT / "README.md")], capture_output=True, text=True, check=True)
    command = result.stdout.strip()
    assert "pytest" in command and "pip install" in command
    assert "<!-- test-command -->" in (ROOT / ".ci" / "run").read_text()


def test_cuda_sources_are_packaged():
    """Every .cu/.cuh file under dgboost/kernels is named by pyproject's package-data, so a
    non-editable install can compile the kernels."""
    import fnmatch
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["dgboost"]
    sources = [p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "kernels").iterdir()
               if p.suffix in (".cu", ".cuh")]
    assert len(sources) >= 6
    for source in sources:
        assert any(fnmatch.fnmatch(source, pattern) for pattern in patterns), source
