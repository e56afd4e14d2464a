"""The shape of the package: one `senti` namespace, a light `import senti`, layers that import downwards,
short CLI modules, file names only in `layout`, and one schema per artifact."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SENTI = ROOT / "senti"
PACKAGES = {"senti": "senti", "senti.cli": "cli", "senti.toolkit": "toolkit", "senti.export": "export",
            "senti.serving": "serving", "senti.benchmarks": "benchmarks", "senti.kernels": "kernels"}
LAYERS = ("core", "serving", "export", "kernels", "toolkit", "benchmarks", "cli")


def package_files(*extra: str) -> list[Path]:
    """Every module of the package, every folder level, and of the `extra` repository folders."""
    return sorted([*SENTI.rglob("*.py"), *(p for folder in extra for p in (ROOT / folder).rglob("*.py"))])


def _run(script: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          cwd=cwd, timeout=120, **kw)


def test_only_the_senti_namespace_is_importable_and_import_senti_is_light(tmp_path):
    """Outside the repository no bare serving/export/toolkit/benchmarks exists; senti and its runtime import
    neither paddle, paddlenlp, the toolkit nor export."""
    result = _run("""
        import importlib, sys
        for bare in ("serving", "export", "toolkit", "benchmarks", "cli"):
            try:
                importlib.import_module(bare)
            except ModuleNotFoundError:
                pass
            else:
                raise SystemExit(f"bare module {bare} is importable")
        import senti
        from senti.serving import Predictor
        assert senti.Predictor is Predictor
        heavy = [m for m in ("paddle", "paddlenlp", "senti.toolkit", "senti.export", "senti.cli") if m in sys.modules]
        print(heavy)
    """, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_entry_points_are_the_library_functions():
    import senti
    from senti.export.pipeline import ExportConfig
    from senti.toolkit.training import distill, exporting, train
    from senti.toolkit.training.config import DistillConfig, TrainConfig

    assert senti.run_training is train.run_training and senti.run_distillation is distill.run_distillation
    assert senti.export_checkpoint is exporting.export_checkpoint
    assert (senti.TrainConfig, senti.DistillConfig, senti.ExportConfig) == (TrainConfig, DistillConfig, ExportConfig)
    with pytest.raises(AttributeError):
        senti.nothing_here  # noqa: B018


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


# Each layer and what it must never import: core <- serving <- export <- kernels <- toolkit <- benchmarks <- cli.
FORBIDDEN = {
    "core": ("senti.serving", "senti.toolkit", "senti.export", "senti.kernels", "senti.benchmarks", "senti.cli"),
    "serving": ("senti.toolkit", "senti.export", "senti.kernels", "senti.benchmarks", "senti.cli", "paddlenlp"),
    "export": ("senti.toolkit", "senti.kernels", "senti.benchmarks", "senti.cli"),
    "kernels": ("senti.serving", "senti.toolkit", "senti.export", "senti.benchmarks", "senti.cli", "paddlenlp"),
    "toolkit": ("senti.benchmarks", "senti.cli"),
    "benchmarks": ("senti.cli",),
    "experiments": (),  # the scripts behind the results pages: any stage, but by the senti name like a user
}
BARE = ("core", "serving", "export", "kernels", "toolkit", "benchmarks", "cli")


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_import_only_downwards_and_only_by_the_senti_name(layer):
    for path in sorted((ROOT / layer if layer == "experiments" else SENTI / layer).rglob("*.py")):  # every level
        if path.name == "peer_worker.py":  # runs in the peer environment, without senti
            continue
        for name in _imports(path):
            assert not name.startswith(FORBIDDEN[layer]), f"{path.relative_to(ROOT)} imports {name}"
            assert name.split(".")[0] not in BARE, f"{path.relative_to(ROOT)} imports bare {name}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at the top or inside a function alike (`from a import b`
    where a.b is a module counts as importing a.b)."""
    modules = {_module_name(p): p for p in package_files()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [base])])
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan): each is an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_modules_or_inside_any_package():
    """Function-level imports included. Inside each package its parts (modules and subpackages, each taken
    whole) import one another without a circle too: a wing never imports a wing that imports it back."""
    graph = import_graph()
    assert circles(graph) == []
    packages = {m for m in graph if (SENTI.parent / m.replace(".", "/") / "__init__.py").exists()}
    for package in sorted(packages):
        prefix = package + "."
        collapsed: dict[str, set[str]] = {}
        for module, targets in graph.items():
            if module.startswith(prefix):
                part = module[len(prefix):].split(".")[0]
                collapsed.setdefault(part, set()).update(
                    t[len(prefix):].split(".")[0] for t in targets if t.startswith(prefix))
        collapsed = {part: targets - {part} for part, targets in collapsed.items()}
        assert circles(collapsed) == [], package


# The toolkit's wings, lowest first: each imports only the wings before it (senti/toolkit/__init__.py).
WINGS = ("data", "evaluation", "training", "surge", "cluster")


def test_toolkit_wings_import_downwards_only():
    graph = import_graph()
    for module, targets in graph.items():
        if not module.startswith("senti.toolkit."):
            continue
        part = module.split(".")[2]
        allowed = set(WINGS[: WINGS.index(part)]) | {part} if part in WINGS else set()
        for target in targets:
            if target.startswith("senti.toolkit."):
                wing = target.split(".")[2]
                assert wing not in WINGS or wing in allowed, f"{module} imports {target}"


def test_cli_modules_are_short_and_its_choices_are_the_library_tuples():
    for path in (SENTI / "cli").glob("*.py"):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 200, path.name
    from senti.benchmarks.suites import SUITES
    from senti.cli import bench, evaluate, predict, train
    from senti.serving.backends import BACKENDS
    from senti.serving.predictor import LONG_TEXT_MODES
    from senti.toolkit.data.splits import EVAL_SPLITS
    from senti.toolkit.training.config import DEVICES

    values = lambda enum: tuple(e.value for e in enum)  # noqa: E731
    assert values(predict.Backend) == ("auto", *BACKENDS) and values(predict.LongText) == LONG_TEXT_MODES
    assert values(train.Device) == DEVICES and values(evaluate.Split) == EVAL_SPLITS
    assert values(bench.BenchSuite) == (*SUITES, "all")


def _layout_file_names() -> set[str]:
    """Every file name `layout` declares (its string constants and tuples of them that name a file)."""
    from senti.core import layout

    names = set()
    for key, value in vars(layout).items():
        if key.startswith("__"):
            continue
        for item in (value.values() if isinstance(value, dict) else value if isinstance(value, tuple) else (value,)):
            if isinstance(item, str) and "." in item and " " not in item and not item.startswith("."):
                names.add(item)
    return names


ARTIFACT_NAMES = _layout_file_names()


def test_artifact_file_names_live_only_in_layout():
    for path in package_files():
        if path.name == "layout.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in ARTIFACT_NAMES, f"{path.relative_to(ROOT)} spells {node.value!r}"


def test_lists_of_row_file_suffixes_live_only_in_the_one_table():
    """core.rows.ROW_FORMATS: a tuple or set of two or more row-file suffixes spelled anywhere else is a second
    table (there were three: rows, streaming output, Ray)."""
    from senti.core.rows import ROW_FORMATS

    for path in package_files():
        if path.relative_to(ROOT).as_posix() == "senti/core/rows.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                spelled = {e.value for e in node.elts if isinstance(e, ast.Constant)} & set(ROW_FORMATS)
                assert len(spelled) < 2, f"{path.relative_to(ROOT)}:{node.lineno} lists {sorted(map(str, spelled))}"


def test_export_json_has_one_reader():
    """serving.export_folder.read_meta is the one reader of export.json (it also checks the parity evidence):
    a second (core.artifacts.read_export_meta) read and checked less, and `senti serve`, the Ray driver and
    the bench read it through both."""
    for path in package_files("experiments"):
        if path.relative_to(ROOT).as_posix() == "senti/serving/export_folder.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("read", "parse") and \
                    isinstance(node.value, ast.Name) and node.value.id == "ExportMeta":
                raise AssertionError(f"{path.relative_to(ROOT)}:{node.lineno} reads export.json itself")
            assert not (isinstance(node, ast.Name) and node.id == "read_export_meta"), path


def test_every_format_has_its_maker_and_the_export_options_follow_from_the_formats():
    """A new backend is a FORMATS row and a maker registered under its name (docs/ARCHITECTURE.md, "Recipes"):
    no list of format names or options is written a second time."""
    from senti.export.pipeline import EXPORT_FORMATS, MAKERS, QUANTIZE_CHOICES
    from senti.serving.backends import FORMATS

    assert set(MAKERS) == set(FORMATS)
    assert EXPORT_FORMATS == ("paddle", "onnx") and QUANTIZE_CHOICES == ("int8",)
    for path in package_files():
        if path.relative_to(ROOT).as_posix() == "senti/serving/backends.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "fmt":
                named = [c.value for c in node.comparators if isinstance(c, ast.Constant)]
                assert not named, f"{path.relative_to(ROOT)}:{node.lineno} branches on the format {named}"


def test_the_parity_rules_live_in_one_module():
    """Export's verdict and the check at every load were two judges (export/parity.py, and the loader's own
    `agree < 0.9`): a comparison of a label agreement or a logit difference with a limit outside
    senti/serving/parity.py is a second one."""
    for path in package_files():
        if path.relative_to(ROOT).as_posix() == "senti/serving/parity.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                names = {n.id if isinstance(n, ast.Name) else getattr(n, "attr", "") for n in (node.left, *node.comparators)}
                assert not any("agree" in n or "diff" in n for n in names), \
                    f"{path.relative_to(ROOT)}:{node.lineno} judges parity itself"


def test_settings_share_one_validated_base():
    from senti.core.errors import SentiError
    from senti.toolkit.training.config import DistillConfig, RunConfig, TrainConfig

    assert issubclass(TrainConfig, RunConfig) and issubclass(DistillConfig, RunConfig)
    with pytest.raises(SentiError, match="invalid distillation setting: device must be one of"):
        DistillConfig(teacher="t", dataset="d", output_dir="o", device="tpu")
    with pytest.raises(SentiError, match="max_steps must be at least 1"):
        DistillConfig(teacher="t", dataset="d", output_dir="o", max_steps=0)
    with pytest.raises(SentiError, match="loss weights must be non-negative"):
        DistillConfig(teacher="t", dataset="d", output_dir="o", loss_weights={"soft": -1})
    config = DistillConfig(teacher="t", dataset="d", output_dir="o", eval_every=5, early_stop=2, max_seq_len=64)
    assert DistillConfig.from_json(json.loads(json.dumps(config.to_json()))) == config
    assert config.weights() == {"soft": 0.5, "hard": 0.5}


def test_distill_cli_takes_the_shared_options():
    from typer.testing import CliRunner

    from senti.cli import app

    result = CliRunner().invoke(app, ["distill", "--help"], terminal_width=200)
    for option in ("--max-seq-len", "--warmup", "--eval-every", "--early-stop", "--amp-dtype", "--loss-weights"):
        assert option in result.output, option


@pytest.mark.slow
def test_a_normal_install_holds_only_the_senti_namespace(tmp_path):
    """A wheel (a normal, not editable, install) has every module under senti/ and imports from anywhere. Built from
    a copy of the tree without build/: setuptools reuses build/lib, where a moved file's old place lingered and
    hid that its new folder was not declared as package data."""
    import shutil

    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv*", "build", "runs", "site", "*.egg-info",
                                                                "__pycache__", ".mypy_cache", ".ruff_cache"))
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels),
                            str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next(wheels.glob("senti-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"senti", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}, tops
    for package, _folder in PACKAGES.items():
        assert f"{package.replace('.', '/')}/__init__.py" in names, package
    assert not [n for n in names if "experiments" in n]  # the results pages' scripts stay in the repository
    for page in ("senti/serving/static/", "senti/toolkit/surge/static/"):  # the pages' static files ship
        assert any(n.startswith(page) for n in names), page
    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
                                str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    result = _run("""
        import senti.serving, senti.cli, senti.toolkit.training.config
        print(senti.serving.__file__)
        try:
            import serving
        except ModuleNotFoundError:
            print("no bare serving")
    """, tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [str(site / "senti" / "serving" / "__init__.py"), "no bare serving"]


def test_no_module_beside_the_worker_script_shadows_the_standard_library():
    """senti/toolkit/cluster/worker.py runs as a script for paddle.distributed.launch, so its folder is first on
    the workers' sys.path: a module there named like a standard-library one would replace it."""
    from senti.toolkit.cluster import launch

    stdlib = set(sys.stdlib_module_names)
    folder = Path(launch.__file__).parent
    assert (folder / "worker.py").is_file()
    clashes = [p.name for p in folder.glob("*.py") if p.stem in stdlib]
    assert not clashes, clashes


def test_train_and_distill_options_are_the_settings_fields():
    """The CLI passes each option to the settings class by name: every field has its option, and no option is lost."""
    import inspect
    from dataclasses import fields

    from senti.cli import distill, pretrain, train
    from senti.toolkit.training.config import DistillConfig, TrainConfig
    from senti.toolkit.training.pretrain import PretrainConfig

    unsettable = {"dataset", "max_minutes"}  # set by the command itself (pretraining reads --corpus), or its own
    launch = {"devices", "nnodes", "node_rank", "master", "join_timeout"}  # where the run goes, not what it does
    for command, config, extra in ((train.train, TrainConfig, launch), (distill.distill, DistillConfig, launch),
                                   (pretrain.pretrain, PretrainConfig, set())):
        options = set(inspect.signature(command).parameters)
        settable = {f.name for f in fields(config)} - {"device", "weight_decay", "max_grad_norm",
                                                       "init_loss_scaling", "min_freq"}
        if config is PretrainConfig:
            # fill_minutes: derived by the command from --max-minutes without --epochs or --max-steps; amp_dtype:
            # the command pretrains on a CPU, where --amp is bfloat16
            settable -= {"fill_minutes", "amp_dtype"}
        assert settable - options == set(), (command.__name__, settable - options)
        assert options - settable - extra - unsettable - launch - {"device"} == set(), command.__name__


def test_each_settings_class_holds_only_what_its_command_uses():
    """Pretraining reads --corpus and has no dev evaluation: its settings have no such fields (they had
    `dataset: str = ""  # unused`)."""
    from dataclasses import fields

    from senti.toolkit.training.config import ClassifierConfig, RunConfig
    from senti.toolkit.training.pretrain import PretrainConfig

    classifier_only = {f.name for f in fields(ClassifierConfig)} - {f.name for f in fields(RunConfig)}
    assert classifier_only == {"dataset", "eval_every", "early_stop", "calibrate"}  # calibrated on dev
    assert not classifier_only & {f.name for f in fields(PretrainConfig)}


def test_the_tests_mirror_the_code():
    """Each core module has its unit tests in tests/core/test_<module>.py; the toolkit's tests sit in its wings'
    folders; no test file names or cites the issue that made it (five did: test_first_run, test_surge_loop...)."""
    tests = ROOT / "tests"
    for module in (SENTI / "core").glob("*.py"):
        if module.stem != "__init__":
            assert (tests / "core" / f"test_{module.stem}.py").is_file(), f"no tests/core/test_{module.stem}.py"
    assert {p.name for p in (tests / "toolkit").iterdir() if p.is_dir() and not p.name.startswith("_")} <= set(WINGS)
    assert not list((tests / "toolkit").glob("test_*.py"))  # each in its wing's folder
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names)), "two test files share a name"
    for path in tests.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"[Ii]ssue \d+", text), f"{path.relative_to(ROOT)} cites an issue"
    for stale in ("test_first_run", "test_untrusted_files", "test_production_options", "test_server_limits",
                  "test_surge_loop", "test_file_doors"):
        assert stale + ".py" not in names


def test_the_tests_are_a_package_that_imports_its_helpers_by_name():
    """`from tests.helpers import ...`, not `from helpers import ...`, which worked only because pytest put tests/
    on the path."""
    tests = ROOT / "tests"
    folders = [d for d in [tests, *tests.rglob("*")] if d.is_dir() and d.name != "__pycache__"
               and any(d.glob("*.py"))]
    assert [str(d.relative_to(ROOT)) for d in folders if not (d / "__init__.py").is_file()] == []
    bare = [str(p.relative_to(ROOT)) for p in tests.rglob("*.py")
            if re.search(r"^\s*(from (helpers|conftest|test_\w+) import|import (helpers|conftest|test_\w+)\b)",
                         p.read_text("utf-8"), re.M)]
    assert bare == []


def _functions():
    """(path, function node, whether it is a command's) for every function of the package."""
    import ast

    for path in package_files():
        command = path.is_relative_to(SENTI / "cli")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, node, command


def test_no_function_is_over_60_lines_nor_a_command_over_80():
    """A newcomer reads a function whole: the house rule (docs/ARCHITECTURE.md), checked on every module; a
    command's option list alone is long, so the command line's functions may run to 80."""
    long = []
    for path, node, command in _functions():
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        if lines > (80 if command else 60):
            long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


def test_no_function_outside_the_command_line_takes_more_than_eight_parameters():
    """More than eight become a settings object (a dataclass the call builds), as `RayJob`, `Selection` or
    `StepPlan`; `self`, `cls` and a PyLayer's `ctx` are not counted, nor a command's options."""
    wide = []
    for path, node, command in _functions():
        a = node.args
        names = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
        names = names[1:] if names and names[0] in ("self", "cls", "ctx") else names
        if not command and len(names) > 8:
            wide.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({len(names)} parameters)")
    assert not wide, wide


WORKSHOP = re.compile(r"\.\./shared|/work/|/root/|/home/\w|PYTHONPATH=/|\bsessions?\b|\b[Tt]his build\b|\basked\b")


def _workshop_words(text: str) -> list[str]:
    return [m.group(0) for m in WORKSHOP.finditer(text)]


def test_the_docs_speak_to_users_not_of_the_workshop():
    """A user's data is `chnsenticorp/`, not a folder of the machine the figures were made on; no tracker
    language ("session", "this build", what was "asked")."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = {str(p.relative_to(ROOT)): words for p in pages if (words := _workshop_words(p.read_text("utf-8")))}
    assert found == {}


def test_the_workshop_check_catches_each_kind():
    for text in ("--dataset ../shared/data/chnsenticorp", "PYTHONPATH=/work/main python", "measured that session",
                 "this build is faster", "the +3 points asked"):
        assert _workshop_words(text), text
    assert _workshop_words("--dataset chnsenticorp/ --output-dir runs/e5") == []


def test_code_comments_cite_docs_pages_that_exist():
    """Comments cite a docs page by its path; README sections move, so a comment citing one goes stale."""
    stale, missing = [], []
    for path in sorted([*(ROOT / "senti").rglob("*.py"), *(ROOT / "experiments").rglob("*.py")]):
        text = path.read_text("utf-8")
        stale += [f"{path.name}: {m.group(0)}" for m in re.finditer(r"\(README\b[^)]*\)|README, \"", text)]
        missing += [f"{path.name}: {m}" for m in re.findall(r"docs/[\w/-]+\.md", text) if not (ROOT / m).is_file()]
    assert stale == [] and missing == []


SCHEMA_MODULES = ("senti.core.artifacts", "senti.core.checkpoint", "senti.core.runtime", "senti.toolkit.records",
                  "senti.toolkit.training.pretrain", "senti.toolkit.training.convert", "senti.benchmarks.results")


def _bare_types(hint, alias_names: set[str]) -> list[str]:
    """The untyped parts of a field's annotation: a bare dict or list, Any, a container of either."""
    import typing

    if hint is typing.Any:
        return ["Any"]
    if hint in (dict, list, tuple, set):
        return [hint.__name__]
    if isinstance(hint, typing.ForwardRef) or str(hint) in alias_names:
        return []
    return [bad for arg in typing.get_args(hint) if arg is not Ellipsis for bad in _bare_types(arg, alias_names)]


def _schema_classes() -> list[type]:
    """Every schema (a file's `ArtifactMeta`) and every record nested in one (`Record`), found in the modules that
    hold them; a class of either kind anywhere else fails here, so the list cannot fall behind."""
    import importlib

    from senti.core.artifacts import ArtifactMeta, FormatRecord, Parity, Record, SplitRecipe, TokenizerSettings

    found = {FormatRecord, Parity, SplitRecipe, TokenizerSettings}
    for name in SCHEMA_MODULES:
        module = importlib.import_module(name)
        found |= {v for v in vars(module).values() if isinstance(v, type) and v.__module__ == name
                  and issubclass(v, ArtifactMeta | Record) and v not in (ArtifactMeta, Record)}
    holders = {name.replace(".", "/") + ".py" for name in SCHEMA_MODULES}
    for path in package_files():
        if str(path.relative_to(ROOT)) in holders:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and {ast.unparse(b) for b in node.bases} & {"ArtifactMeta", "Record"}:
                raise AssertionError(f"{path.relative_to(ROOT)}: {node.name} is a schema outside SCHEMA_MODULES")
    return sorted(found, key=lambda c: c.__name__)


def test_no_schema_field_is_a_bare_dict_list_or_any():
    """Records are typed in memory: a field of a schema or a nested record is a record, a typed mapping or list, or
    a scalar; never a bare `dict` (53 were: `model: dict`, `evaluations: list[dict]`...), `list` or `Any`.
    JSONValue (any JSON) is for the one record whose keys vary by its maker, a bench suite's measurements."""
    import typing
    from dataclasses import fields

    from senti.core import artifacts

    bare = []
    for cls in _schema_classes():
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            hint = hints[f.name]
            if hint == list[dict[str, artifacts.JSONValue]] and cls.__name__ == "BenchResults":
                continue
            problems = _bare_types(hint, {str(artifacts.JSONValue)})
            if problems:
                bare.append(f"{cls.__module__}.{cls.__name__}.{f.name}: {hint} ({', '.join(problems)})")
    assert len(_schema_classes()) > 40
    assert not bare, "\n".join(bare)


def test_the_bare_type_check_catches_each_kind():
    import typing

    for hint in (dict, list, typing.Any, dict | None, list[dict], dict[str, dict], dict[str, typing.Any],
                 list[dict[str, int]] | list):
        assert _bare_types(hint, set()), hint
    for typed in (dict[str, int], list[str] | None, dict[str, list[int]], tuple[str, ...], int | None):
        assert not _bare_types(typed, set()), typed
