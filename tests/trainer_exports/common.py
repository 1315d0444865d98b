"""What the trainer export checkers share: a trainer's key list, the groups
of a row-major mesh, and loading a checker by its path.

A checker is loaded under a name of its own ("foldplan_check_<trainer>") so
that it never shadows the trainer's real package (torchtitan, olmo_core, ...)
should that be installed.
"""
import importlib.util
import itertools
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
KEYS_DIR = HERE.parent / "data" / "trainer_keys"


def load_keys(name):
    """The names of tests/data/trainer_keys/<name>.txt: one a line after the
    first, which must be a comment naming the source commit; '#' starts a
    comment."""
    path = KEYS_DIR / f"{name}.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("#"):
        raise ValueError(f"{path}: the first line must be a comment naming the source commit")
    return {n for n in (line.split("#", 1)[0].strip() for line in lines[1:]) if n}


def mesh_groups(shape, axes):
    """Groups of ranks (the row-major index into a mesh of `shape`) varying
    along the dims in `axes`, each sorted, in sorted order."""
    groups = {}
    for rank, coord in enumerate(itertools.product(*[range(n) for n in shape])):
        key = tuple(c for k, c in enumerate(coord) if k not in axes)
        groups.setdefault(key, []).append(rank)
    return sorted(sorted(g) for g in groups.values())


def canonical(groups):
    """A group list as mesh_groups orders it, for comparison."""
    return sorted(sorted(g) for g in groups)


def load_checker(module):
    """tests/trainer_exports/<module>.py, e.g. "olmo_core"."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    spec = importlib.util.spec_from_file_location(f"foldplan_check_{module}", HERE / f"{module}.py")
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    return checker
