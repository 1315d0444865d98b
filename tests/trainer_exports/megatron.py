"""Checks `foldplan ranks --format megatron` against the rank map.

    check(text, rankmap, fmt) -> list of errors ([] when the export is right)

`text` is what the export printed, `rankmap` the `foldplan ranks --format
rankmap` JSON of the same inputs (a dict), `fmt` the format's name (only in
the messages). The arguments are split as a shell splits them (shlex); every
flag must be in tests/data/trainer_keys/megatron.txt (Megatron-LM d98e8a64's
flags the export may write); the degrees must multiply to the world
(tp*cp*dp*pp == etp*ep*edp*pp == world) and equal the map's; and the groups
Megatron builds from those flags, through the port of its RankGenerator
below (megatron/core/parallel_state.py), must equal the map's, the
embedding groups included (pretrain_gpt.py: [first, last] of each pipeline
group tied, [first] and the MTP stages untied).
"""
import shlex

from common import load_keys

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
PP_DP_ORDER = "tp-cp-ep-pp-dp"  # --use-tp-pp-dp-mapping


def generate_masked_orthogonal_rank_groups(world_size, parallel_size, mask):
    """Megatron's function of that name: the groups of ranks varying along the
    masked axes (sizes fastest first), unmasked axes as the group counter."""
    def prefix_product(a, init=1):
        r = [init]
        for v in a:
            init = init * v
            r.append(init)
        return r

    def inner_product(a, b):
        return sum(x * y for x, y in zip(a, b))

    def decompose(index, shape, stride=None):
        if stride is None:
            stride = prefix_product(shape)
        idx = [(index // d) % s for s, d in zip(shape, stride)]
        assert sum(x * y for x, y in zip(idx, stride[:-1])) == index
        return idx

    masked_shape = [s for s, m in zip(parallel_size, mask) if m]
    unmasked_shape = [s for s, m in zip(parallel_size, mask) if not m]
    global_stride = prefix_product(parallel_size)
    masked_stride = [d for d, m in zip(global_stride, mask) if m]
    unmasked_stride = [d for d, m in zip(global_stride, mask) if not m]
    group_size = prefix_product(masked_shape)[-1]
    num_of_group = world_size // group_size
    ranks = []
    for group_index in range(num_of_group):
        decomposed_group_idx = decompose(group_index, unmasked_shape)
        rank = []
        for rank_in_group in range(group_size):
            decomposed_rank_idx = decompose(rank_in_group, masked_shape)
            rank.append(inner_product(decomposed_rank_idx, masked_stride)
                        + inner_product(decomposed_group_idx, unmasked_stride))
        ranks.append(rank)
    return ranks


class RankGenerator:
    """Megatron's RankGenerator(tp, ep, dp, pp, cp, order): axes of size 1
    missing from the order are appended in tp, pp, dp, ep, cp order."""

    def __init__(self, tp, ep, dp, pp, cp, order):
        assert ep == 1 or cp == 1, "Megatron: ep and cp cannot both be > 1 in one generator"
        self.world_size = tp * dp * pp * cp * ep
        sizes = {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "cp": cp}
        order = order.lower()
        for name, size in sizes.items():
            if name not in order.split("-"):
                if size != 1:
                    raise RuntimeError(f"the size of ({name}) is ({size}), but {order} does not name it")
                order = order + "-" + name
        self.order = order
        self.ordered_size = [sizes[token] for token in order.split("-")]

    def get_mask(self, token):
        ordered = self.order.split("-")
        mask = [False] * len(ordered)
        for t in token.split("-"):
            mask[ordered.index(t)] = True
        return mask

    def get_ranks(self, token):
        return generate_masked_orthogonal_rank_groups(self.world_size, self.ordered_size, self.get_mask(token))


def parse_args(text):
    """(flags, comments): flag -> list of its values ([] for a switch), and
    the comment lines. Arguments are the non-comment lines, continued with \\."""
    comments = [line for line in text.splitlines() if line.startswith("#")]
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    # A shell drops "\" + newline (line continuation) before splitting; shlex does not.
    words = shlex.split(body.replace("\\\n", " "))
    flags, current = {}, None
    for w in words:
        if w.startswith("--"):
            if w in flags:
                raise ValueError(f"{w} given twice")
            flags[w] = []
            current = w
        elif current is None:
            raise ValueError(f"{w!r} before any flag")
        else:
            flags[current].append(w)
    return flags, comments


def expand_layout(text):
    """Megatron's --pipeline-model-parallel-layout, expanded: one string per
    virtual stage ('E', 't', 'm', 'L' characters)."""
    pos = 0

    def number():
        nonlocal pos
        start = pos
        while pos < len(text) and text[pos].isdigit():
            pos += 1
        if start == pos:
            raise ValueError(f"layout {text!r}: a number expected at column {pos + 1}")
        return int(text[start:pos])

    def sequence():
        nonlocal pos
        out = ""
        while pos < len(text) and text[pos] != ")":
            c = text[pos]
            if c.isspace():
                pos += 1
                continue
            if c == "(":
                pos += 1
                atom = sequence()
                if pos >= len(text) or text[pos] != ")":
                    raise ValueError(f"layout {text!r}: '(' without ')'")
                pos += 1
            elif c in "EtmL|":
                atom = c
                pos += 1
            else:
                raise ValueError(f"layout {text!r}: unexpected {c!r} at column {pos + 1}")
            if pos < len(text) and text[pos] == "*":
                pos += 1
                atom = atom * number()
            out += atom
        return out

    flat = sequence()
    if pos != len(text):
        raise ValueError(f"layout {text!r}: ')' without '('")
    return flat.split("|")


def one_int(flags, flag, errors):
    values = flags.get(flag)
    if values is None:
        return None
    if len(values) != 1 or not values[0].lstrip("-").isdigit():
        errors.append(f"{flag} {' '.join(values)}: expected one integer")
        return None
    return int(values[0])


def sorted_groups(groups):
    return sorted(sorted(g) for g in groups)


def describe(groups):
    """The first groups, shortened, for a message."""
    def one(g):
        return "[" + ",".join(map(str, g[:6])) + (",..." if len(g) > 6 else "") + "]"
    return ",".join(one(g) for g in groups[:3]) + (",..." if len(groups) > 3 else "")


def check(text: str, rankmap: dict, fmt: str) -> list[str]:
    errors = []
    try:
        flags, comments = parse_args(text)
    except ValueError as e:
        return [f"{fmt}: the arguments do not split: {e}"]
    keys = load_keys("megatron")
    for flag in flags:
        if flag not in keys:
            errors.append(f"{fmt}: {flag} is not in megatron.txt (Megatron-LM d98e8a64's flags)")

    world = rankmap["world_size"]
    d = rankmap["degrees"]
    deg = {}
    for key, flag in [("tp", "--tensor-model-parallel-size"), ("pp", "--pipeline-model-parallel-size"),
                      ("cp", "--context-parallel-size"), ("ep", "--expert-model-parallel-size"),
                      ("etp", "--expert-tensor-parallel-size")]:
        value = one_int(flags, flag, errors)
        if value is None:
            errors.append(f"{fmt}: {flag} missing")
            return errors
        if value < 1:
            errors.append(f"{fmt}: {flag} {value} < 1")
            return errors
        deg[key] = value
    for line in comments:
        if line.startswith("# world size "):
            said = int(line.split()[3])
            if said != world:
                errors.append(f"{fmt}: the comment says world size {said}, the rank map {world}")
    tp, cp, pp, ep, etp = deg["tp"], deg["cp"], deg["pp"], deg["ep"], deg["etp"]
    if world % (tp * cp * pp) or world % (etp * ep * pp):
        errors.append(f"{fmt}: tp*cp*pp = {tp * cp * pp} or etp*ep*pp = {etp * ep * pp} does not divide world {world}")
        return errors
    dp, edp = world // (tp * cp * pp), world // (etp * ep * pp)
    deg.update(dp=dp, edp=edp)
    if tp * cp * dp * pp != world or etp * ep * edp * pp != world:
        errors.append(f"{fmt}: degrees do not multiply to world {world}")
    for key, value in deg.items():
        if d[key] != value:
            errors.append(f"{fmt}: {key} {value} from the flags, {d[key]} in the rank map")

    # Megatron's groups from the flags (parallel_state.initialize_model_parallel).
    order = PP_DP_ORDER if "--use-tp-pp-dp-mapping" in flags else DEFAULT_ORDER
    try:
        dense = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order=order)
        expert = RankGenerator(tp=etp, ep=ep, dp=edp, pp=pp, cp=1, order=order)
    except (AssertionError, RuntimeError) as e:
        return errors + [f"{fmt}: Megatron's RankGenerator refuses the flags: {e}"]
    built = {"tp": dense.get_ranks("tp"), "cp": dense.get_ranks("cp"), "dp": dense.get_ranks("dp"),
             "dp_cp": dense.get_ranks("dp-cp"), "tp_cp": dense.get_ranks("tp-cp"), "tp_dp": dense.get_ranks("tp-dp"),
             "tp_dp_cp": dense.get_ranks("tp-dp-cp"), "mp": dense.get_ranks("tp-pp"), "pp": dense.get_ranks("pp"),
             "ep": expert.get_ranks("ep"), "etp": expert.get_ranks("tp"), "tp_ep": expert.get_ranks("tp-ep"),
             "tp_ep_pp": expert.get_ranks("tp-ep-pp"), "edp": expert.get_ranks("dp")}
    if sorted_groups(expert.get_ranks("pp")) != sorted_groups(built["pp"]):
        errors.append(f"{fmt}: Megatron asserts equal dense and expert pipeline groups; order {order} breaks it")

    # The pipeline: stages (virtual stages, pp x vpp) from the layout string,
    # else from the vpp flag; MTP stages from the layout, else the last.
    stages = None
    if "--pipeline-model-parallel-layout" in flags:
        values = flags["--pipeline-model-parallel-layout"]
        try:
            stages = expand_layout(values[0]) if len(values) == 1 else None
        except ValueError as e:
            errors.append(f"{fmt}: {e}")
        if stages is not None:
            if len(stages) % pp:
                errors.append(f"{fmt}: the layout's {len(stages)} stages do not divide over pp {pp}")
            if len(stages) // max(pp, 1) != d["vpp"]:
                errors.append(f"{fmt}: the layout gives vpp {len(stages) // pp}, the rank map {d['vpp']}")
            layers = [s.count("t") for s in stages]
            if "stage_layers" in rankmap and layers != rankmap["stage_layers"]:
                errors.append(f"{fmt}: the layout's decoder layers {layers} != stage_layers {rankmap['stage_layers']}")
            mtp = sum(s.count("m") for s in stages)
            said = one_int(flags, "--mtp-num-layers", errors) or 0
            if mtp != said:
                errors.append(f"{fmt}: the layout holds {mtp} MTP layers, --mtp-num-layers {said}")
    elif "--num-layers-per-virtual-pipeline-stage" in flags:
        per = one_int(flags, "--num-layers-per-virtual-pipeline-stage", errors)
        layers = rankmap.get("stage_layers")
        if per is not None and layers and any(n != per for n in layers):
            errors.append(f"{fmt}: --num-layers-per-virtual-pipeline-stage {per}, stage_layers {layers}")
        if d["vpp"] < 2:
            errors.append(f"{fmt}: --num-layers-per-virtual-pipeline-stage with vpp {d['vpp']}")
    elif d["vpp"] > 1 and pp > 1:
        errors.append(f"{fmt}: vpp {d['vpp']} but neither a layout nor layers per virtual stage")

    # Embedding groups (pretrain_gpt.py ~493-505 at d98e8a64).
    untied = "--untie-embeddings-and-output-weights" in flags
    if pp == 1:
        emb_stages = [0]
    elif not untied:
        emb_stages = [0, pp - 1]
    else:
        emb_stages = {0}
        if stages is not None:
            emb_stages |= {c % pp for c, s in enumerate(stages) if "m" in s}
        elif "--mtp-num-layers" in flags:
            emb_stages.add(pp - 1)
        emb_stages = sorted(emb_stages)
    built["embedding"] = [[g[s] for s in emb_stages] for g in built["pp"]]
    built["position_embedding"] = [[g[0]] for g in built["pp"]]

    for kind, groups in built.items():
        theirs = rankmap["groups"].get(kind)
        if theirs is None:
            errors.append(f"{fmt}: the rank map has no {kind} groups")
        elif sorted_groups(groups) != sorted_groups(theirs):
            errors.append(f"{fmt}: Megatron's {kind} groups from the flags {describe(sorted_groups(groups))} differ "
                          f"from the rank map's {describe(sorted_groups(theirs))}")

    # Flags that go together (Megatron's asserts, d98e8a64).
    recipe = rankmap.get("recipe", {})
    if "--use-megatron-fsdp" in flags and flags.get("--ckpt-format") != ["fsdp_dtensor"]:
        errors.append(f"{fmt}: --use-megatron-fsdp without --ckpt-format fsdp_dtensor")
    if recipe.get("fsdp") and "--use-megatron-fsdp" not in flags:
        errors.append(f"{fmt}: the layout has fsdp but no --use-megatron-fsdp")
    if flags.get("--moe-token-dispatcher-type") == ["flex"]:
        backend = flags.get("--moe-flex-dispatcher-backend")
        if backend not in (["deepep"], ["hybridep"]):
            errors.append(f"{fmt}: the flex dispatcher without a deepep or hybridep backend ({backend})")
        if backend == ["deepep"] and "--moe-pad-expert-input-to-capacity" in flags:
            errors.append(f"{fmt}: DeepEP with --moe-pad-expert-input-to-capacity (Megatron refuses it)")
    if "--moe-flex-dispatcher-num-sms" in flags and flags.get("--moe-token-dispatcher-type") != ["flex"]:
        errors.append(f"{fmt}: --moe-flex-dispatcher-num-sms without the flex dispatcher")
    if d["tp"] > 1 and "--sequence-parallel" not in flags:
        errors.append(f"{fmt}: tp {d['tp']} without --sequence-parallel")
    impl = flags.get("--cuda-graph-impl")
    modules = flags.get("--cuda-graph-modules", [])
    if impl is not None and impl[0] not in ("none", "local", "transformer_engine", "full_iteration"):
        errors.append(f"{fmt}: --cuda-graph-impl {impl}")
    if modules and (impl is None or impl == ["full_iteration"]):
        errors.append(f"{fmt}: --cuda-graph-modules {modules} with --cuda-graph-impl {impl}")
    if "moe_preprocess" in modules and "moe_router" not in modules:
        errors.append(f"{fmt}: --cuda-graph-modules moe_preprocess without moe_router")

    # CUDA_DEVICE_MAX_CONNECTIONS=1 where Megatron asserts it (arguments.py
    # ~1474-1477: tp > 1 or cp > 1, without Megatron-FSDP or the EP overlap).
    needs = (tp > 1 or cp > 1) and "--use-megatron-fsdp" not in flags and \
        "--overlap-moe-expert-parallel-comm" not in flags
    said = any("export CUDA_DEVICE_MAX_CONNECTIONS=1" in line for line in comments)
    if needs != said:
        errors.append(f"{fmt}: CUDA_DEVICE_MAX_CONNECTIONS=1 {'missing' if needs else 'set'} for tp {tp}, cp {cp}")
    return errors
