#!/usr/bin/env python3
"""Every trainer's exports of random legal layouts, and of `plan --trainer`'s
best, held to what the trainer loads.

    property_check.py FOLDPLAN_BIN [SAMPLES] [--alternate-clusters]

For each trainer, each shipped model and two clusters (64 H100s of a DGX
fabric, 144 GB200s of two NVL72 racks), SAMPLES layouts (default 2) are
drawn with a fixed seed from `foldplan enumerate --trainer T` (the layouts
legal for that trainer) and exported in each of the trainer's formats; the
trainer's checker (tests/trainer_exports/<trainer>.py, `check(text,
rankmap, fmt)`) parses the export, checks every key against the trainer's
key list (tests/data/trainer_keys/), that the degrees multiply as the
trainer checks, and that the groups rebuilt from the export equal the rank
map's. Then `plan --trainer T`'s best layout must export too: a plan never
proposes a layout its trainer's export refuses.

--alternate-clusters (the sanitized suite, where a search runs ~40x
slower): each trainer and model on one of the two clusters, in turn, so
that every trainer still meets both clusters and every model both across
the trainers, at half the searches.
"""
import ast
import csv
import io
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import load_checker  # noqa: E402

ARGS = [a for a in sys.argv[1:] if a != "--alternate-clusters"]
ALTERNATE = len(ARGS) < len(sys.argv) - 1
FOLDPLAN = ARGS[0]
SAMPLES = int(ARGS[1]) if len(ARGS) > 1 else 2
MODELS = sorted(f[:-5] for f in os.listdir(os.path.join(HERE, "..", "..", "data", "models")) if f.endswith(".json"))
CLUSTERS = [("h100-dgx-16n", 64), ("gb200-nvl72-4r", 144)]
# trainer -> (checker module or None, its export formats)
TRAINERS = {
    "megatron": ("megatron", ["megatron"]),
    "torchtitan": ("torchtitan", ["torchtitan", "torchtitan-toml"]),
    "olmo-core": ("olmo_core", ["olmo-core"]),
    "maxtext": ("maxtext", ["maxtext"]),
    "jax": (None, ["jax"]),  # tests/export_parse_check.py checks the jax mesh's groups
}
failures = []


def run(args):
    p = subprocess.run([FOLDPLAN] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check_export(trainer, checker, fmt, base, layout, where, force):
    # --force for the random layouts: their groups are checked whether or not
    # they fit in memory. A plan's best must export without it.
    rc, text, err = run(["ranks"] + base + ["--layout", layout, "--format", fmt] + (["--force"] if force else []))
    if rc != 0:
        failures.append(f"{where} --format {fmt}: refused (exit {rc}): {err.strip()}")
        return
    if checker is None:
        try:
            ast.parse(text)
        except SyntaxError as e:
            failures.append(f"{where} --format {fmt}: not Python: {e}")
        return
    rc, rm, err = run(["ranks"] + base + ["--layout", layout, "--format", "rankmap", "--force"])
    if rc != 0:
        failures.append(f"{where} --format rankmap: exit {rc}: {err.strip()}")
        return
    for e in checker.check(text, json.loads(rm), fmt):
        failures.append(f"{where} --format {fmt}: {e}")


def main():
    rng = random.Random(20261204)
    exported = 0
    for t, (trainer, (module, formats)) in enumerate(TRAINERS.items()):
        checker = load_checker(module) if module else None
        for c, (cluster, gpus) in enumerate(CLUSTERS):
            for m, model in enumerate(MODELS):
                if ALTERNATE and (t + m) % len(CLUSTERS) != c:
                    continue
                base = ["--cluster", cluster, "--gpus", str(gpus), "--model", model, "--trainer", trainer]
                # CSV, not JSON: the default job's legal sets run to millions
                # of layouts here, and the CSV is a third of the bytes and
                # read a record at a time.
                rc, out, err = run(["enumerate"] + base + ["--format", "csv", "--limit", "0"])
                if rc != 0:
                    failures.append(f"enumerate {' '.join(base)}: exit {rc}: {err.strip()}")
                    continue
                records = csv.reader(io.StringIO(out))
                column = next(records).index("layout")
                layouts = [r[column] for r in records]
                picked = rng.sample(layouts, min(SAMPLES, len(layouts)))
                rc, out, err = run(["plan"] + base + ["--json", "--top", "1"])
                best = []
                if rc in (0, 1) and out.strip():
                    # Exit 1 and no candidate when no legal layout fits in memory.
                    best = [c["layout"]["text"] for c in json.loads(out)["candidates"][:1]]
                    if (rc == 0) != bool(best):
                        failures.append(f"plan {' '.join(base)}: exit {rc} with {len(best)} candidates")
                elif layouts:
                    failures.append(f"plan {' '.join(base)}: exit {rc} with {len(layouts)} legal layouts: {err.strip()}")
                for layout, force in [(l, True) for l in picked] + [(l, False) for l in best]:
                    where = f"ranks {' '.join(base)} --layout {layout}"
                    for fmt in formats:
                        check_export(trainer, checker, fmt, base, layout, where, force)
                        exported += 1
    for f in failures:
        print("FAIL", f)
    print(f"{exported} exports checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
