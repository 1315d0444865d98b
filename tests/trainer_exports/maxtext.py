"""Checks what `foldplan ranks --format maxtext` prints against the rank map.

    check(text, rankmap, fmt) -> list of errors (empty: the export is right)

`text` is the export (YAML), `rankmap` the `foldplan ranks --format rankmap`
JSON of the same layout (a dict), `fmt` the format name used in the
messages. Checked:

- every key written is in tests/data/trainer_keys/maxtext.txt (MaxText
  e591f30c's types.py forbids unknown keys);
- the degrees multiply as MaxText checks them: per axis ici x dcn, the
  product the world, the ICI product one NVLink domain's ranks (whole
  domains of consecutive ranks, one per granule), pipeline_parallel_layers
  divisible by the stages;
- the groups of the mesh rebuilt from those settings (data, stage, fsdp,
  context, tensor, expert, slowest first; the dense layers' batch over
  data, fsdp and expert, the experts' hidden dim over tensor) equal the rank
  map's tp, cp, dp, dp_cp, pp, ep, etp and edp groups;
- the rest says what the rank map says: context_parallel_strategy the CP
  style, pipeline_parallel_layers every decoder layer, the batch and the
  sequence length the job's.
"""
import math

import yaml

from common import canonical, load_keys, mesh_groups

AXES = ["data", "pipeline", "fsdp", "context", "tensor", "expert"]
STRATEGIES = {"all_gather", "ring", "ulysses", "usp"}  # base.yml's context_parallel_strategy values


def check(text, rankmap, fmt="maxtext"):
    errors = []
    err = lambda msg: errors.append(f"{fmt}: {msg}")
    try:
        y = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return [f"{fmt}: not YAML: {e}"]
    if not isinstance(y, dict):
        return [f"{fmt}: not a YAML mapping"]
    keys = load_keys("maxtext")
    for key in y:
        if key not in keys:
            err(f"writes {key}, not in maxtext.txt")

    ici, dcn = [], []
    for a in AXES:
        for prefix, out in (("ici", ici), ("dcn", dcn)):
            v = y.get(f"{prefix}_{a}_parallelism")
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                err(f"{prefix}_{a}_parallelism is {v!r}, not a positive int")
                return errors
            out.append(v)
    shape = [a * b for a, b in zip(ici, dcn)]
    d, w = rankmap["degrees"], rankmap["world_size"]
    if math.prod(shape) != w:
        err(f"mesh {shape} is not the world {w}")
        return errors
    # The mesh as MaxText reads it: pipeline = pp, context = cp, tensor = tp
    # and etp, expert = ep, data x fsdp x expert = dp.
    want = {"pipeline": d["pp"], "context": d["cp"], "tensor": d["tp"], "expert": d["ep"]}
    for a, n in want.items():
        if shape[AXES.index(a)] != n:
            err(f"{a} {shape[AXES.index(a)]} != {n}")
    if d["etp"] != d["tp"]:
        err(f"MaxText's experts are tensor-parallel over tensor: etp {d['etp']} must be tp {d['tp']}")
    if shape[0] * shape[2] * shape[5] != d["dp"]:
        err(f"data x fsdp x expert {shape[0] * shape[2] * shape[5]} != dp {d['dp']}")
    kinds = {"pp": [1], "tp": [4], "cp": [3], "dp": [0, 2, 5], "dp_cp": [0, 2, 3, 5], "ep": [5],
             "etp": [4], "edp": [0, 2, 3]}
    for kind, ax in kinds.items():
        if kind in rankmap["groups"] and mesh_groups(shape, ax) != canonical(rankmap["groups"][kind]):
            err(f"{kind} groups of the mesh {shape} differ from the rank map's")

    # ICI x DCN: each granule (block of prod(ici) consecutive ranks) is one
    # NVLink domain, a different one per block, in GPU order inside.
    size = math.prod(ici)
    place = rankmap.get("placement")
    if place:
        domains, gpus = place["domain"], place["gpu"]
        blocks = [set(domains[i:i + size]) for i in range(0, len(domains), size)]
        if any(len(b) != 1 for b in blocks) or len({next(iter(b)) for b in blocks}) != len(blocks):
            err(f"ICI blocks of {size} ranks do not match the NVLink domains {domains}")
        elif any(gpus[r] <= gpus[r - 1] for r in range(1, len(gpus)) if r % size):
            err("ranks inside an ICI block are not in GPU order")
        if len(blocks) == len(domains) // size and size * len(blocks) == w:
            per_domain = {}
            for dom in domains:
                per_domain[dom] = per_domain.get(dom, 0) + 1
            if any(n != size for n in per_domain.values()):
                err(f"an NVLink domain holds other than {size} ranks: {per_domain}")

    # The pipeline.
    ppl = y.get("pipeline_parallel_layers")
    if d["pp"] > 1 and ppl is not None:
        if not isinstance(ppl, int) or ppl < 1 or ppl % d["pp"]:
            err(f"pipeline_parallel_layers {ppl!r} does not divide over {d['pp']} stages")
        model = rankmap.get("model")
        if model and ppl != model["layers"]:
            err(f"pipeline_parallel_layers {ppl} is not the model's {model['layers']} decoder layers")
        layers = rankmap.get("stage_layers")
        if layers and ppl != sum(layers):
            err(f"pipeline_parallel_layers {ppl} != the {sum(layers)} layers of stage_layers")
        per = y.get("num_layers_per_pipeline_stage")
        if per is not None and per * d["pp"] * d["vpp"] != ppl:
            err(f"num_layers_per_pipeline_stage {per} x pp {d['pp']} x vpp {d['vpp']} != {ppl}")
    elif d["pp"] > 1 and (rankmap.get("model") or rankmap.get("stage_layers")):
        err("pp > 1 with a known layer count, and no pipeline_parallel_layers")
    elif d["pp"] == 1 and ppl is not None:
        err("pipeline_parallel_layers without a pipeline")

    # Context parallelism.
    strategy = y.get("context_parallel_strategy")
    if strategy is not None and strategy not in STRATEGIES:
        err(f"context_parallel_strategy {strategy!r} is none of {sorted(STRATEGIES)}")
    if d["cp"] > 1 and strategy != rankmap["cp_style"]:
        err(f"context_parallel_strategy {strategy!r} for cp_style {rankmap['cp_style']}")

    # The batch and the sequence.
    job = rankmap.get("job")
    if job:
        pdbs = y.get("per_device_batch_size")
        if not isinstance(pdbs, (int, float)) or isinstance(pdbs, bool) or \
                abs(pdbs * w - job["global_batch"]) > 1e-9 * job["global_batch"]:
            err(f"per_device_batch_size {pdbs!r} x {w} devices != global batch {job['global_batch']}")
        if y.get("max_target_length") != job["seq_len"]:
            err(f"max_target_length {y.get('max_target_length')!r} != seq_len {job['seq_len']}")
    return errors
