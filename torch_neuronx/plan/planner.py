"""plan(): will this training step fit each NeuronCore of an instance, and how fast would it run; sweep(): every
layout the instance and the model allow, ranked.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from . import hardware, published
from .config import PlanError, check_tp, head_counts, load_config
from .estimate import StepTime, estimate
from .step import ATTENTION, CHECKPOINTING, DTYPES, OPTIMIZERS, StepSpec
from .trace import CATEGORIES, trace_step


@dataclass
class Plan:
    model: str
    source: str
    parameters: int
    instance: str
    lnc: int
    cores: int                           # per instance
    nodes: int                           # instances
    tp: int
    fsdp: int
    seq: int
    batch: int
    global_batch: int                    # sequences per optimizer step (batch x fsdp x gradient accumulation)
    dtype: str
    optimizer: str
    activation_checkpointing: str        # none / full / selective
    attention: str                       # sdpa / eager
    hbm_per_core: int                    # bytes of HBM per (logical) core
    peak_per_core: int                   # tensors at their peak + the runtime's reserve
    by_category: dict[str, int]          # CATEGORIES + "runtime_reserve": sums to peak_per_core
    fits: bool
    margin_bytes: int                    # hbm_per_core - peak_per_core (negative: short by that much)
    estimate: StepTime
    trace_seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def layout(self) -> str:
        return f"TP={self.tp} x FSDP={self.fsdp}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["layout"] = self.layout
        d["estimate"]["label"] = "estimate"
        return d

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)


@dataclass
class Sweep:
    plans: list[Plan]                    # ranked: layouts that fit first, highest estimated tokens/s first
    skipped: dict[str, str]              # layout -> why it is not a candidate

    @property
    def best(self) -> Plan | None:
        return self.plans[0] if self.plans and self.plans[0].fits else None

    def to_json(self, **kw) -> str:
        return json.dumps({"plans": [p.to_dict() for p in self.plans], "skipped": self.skipped,
                           "best": self.best.layout if self.best else None}, **kw)


def _validate(spec: StepSpec, m: hardware.Machine, config) -> None:
    if spec.dtype not in DTYPES:
        raise PlanError(f"dtype {spec.dtype!r}: choose one of {', '.join(DTYPES)}")
    if spec.optimizer not in OPTIMIZERS:
        raise PlanError(f"optimizer {spec.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
    if spec.activation_checkpointing not in CHECKPOINTING:
        raise PlanError(f"activation checkpointing {spec.activation_checkpointing!r}: choose one of "
                        f"{', '.join(CHECKPOINTING)}")
    if spec.attention not in ATTENTION:
        raise PlanError(f"attention {spec.attention!r}: choose one of {', '.join(ATTENTION)}")
    if spec.attention != "sdpa" and spec.activation_checkpointing == "selective":
        raise PlanError("selective activation checkpointing recomputes the fused attention kernel: use it with "
                        "--attention sdpa (or --activation-checkpointing full)")
    if spec.seq < 1 or spec.batch < 1 or spec.tp < 1 or spec.fsdp < 1:
        raise PlanError("--seq, --batch, --tp and --fsdp must be positive")
    if m.nodes == 1 and spec.world > m.cores:
        raise PlanError(f"TP={spec.tp} x FSDP={spec.fsdp} needs {spec.world} cores; {m.name} at LNC={m.lnc} has "
                        f"{m.cores} (plan several instances with --nodes)")
    if m.nodes > 1 and spec.world != m.world:
        raise PlanError(f"TP={spec.tp} x FSDP={spec.fsdp} is {spec.world} ranks; a job on {m.nodes} instances of "
                        f"{m.cores} cores runs {m.world}: choose TP x FSDP = {m.world}")
    if spec.global_batch is not None and (spec.global_batch < 1 or spec.global_batch % (spec.batch * spec.fsdp)):
        raise PlanError(f"global batch {spec.global_batch} is not a multiple of micro-batch {spec.batch} x FSDP "
                        f"{spec.fsdp} = {spec.batch * spec.fsdp} sequences (each FSDP rank takes its own "
                        f"micro-batches; TP ranks share theirs)")
    check_tp(config, spec.tp, range(1, m.world + 1))
    hardware.check_layout(m, spec.tp, spec.fsdp)


def plan_for(config, source: str, spec: StepSpec, m: hardware.Machine, model_name: str,
             full_trace: bool = False) -> Plan:
    """The plan of a loaded CONFIG (see plan())."""
    _validate(spec, m, config)
    trace = trace_step(config, spec, full=full_trace)
    by_category = {c: trace.by_category[c] for c in CATEGORIES}
    by_category["runtime_reserve"] = m.reserve_per_core
    peak = sum(by_category.values())
    band, band_source = published.band(m.chip)
    return Plan(model=model_name, source=source, parameters=trace.parameters, instance=m.name, lnc=m.lnc,
                cores=m.cores, nodes=m.nodes, tp=spec.tp, fsdp=spec.fsdp, seq=spec.seq, batch=spec.batch,
                global_batch=spec.batch * spec.fsdp * spec.accumulation, dtype=spec.dtype, optimizer=spec.optimizer,
                activation_checkpointing=spec.activation_checkpointing, attention=spec.attention,
                hbm_per_core=m.hbm_per_core, peak_per_core=peak, by_category=by_category,
                fits=peak <= m.hbm_per_core, margin_bytes=m.hbm_per_core - peak,
                estimate=estimate(trace.cost, m, spec, band, band_source), trace_seconds=trace.trace_seconds,
                notes=list(trace.notes))


def plan(model: str, instance: str = "trn2.48xlarge", tp: int = 1, fsdp: int | None = None, seq: int = 2048,
         batch: int = 1, dtype: str = "bf16", optimizer: str = "adamw", activation_checkpointing: str | bool = "none",
         lnc: int | None = None, full_trace: bool = False, nodes: int = 1, global_batch: int | None = None,
         attention: str = "sdpa") -> Plan:
    """Plan one training step of MODEL (preset name, config.json or model directory) on NODES instances of INSTANCE
    with a TP x FSDP layout (fsdp defaults to the cores TP leaves: every core of every instance). BATCH is the
    micro-batch of each FSDP rank; GLOBAL_BATCH the sequences of one optimizer step over the job (gradient
    accumulation; default batch x fsdp). ACTIVATION_CHECKPOINTING: none, full or selective; ATTENTION: sdpa (the
    fused kernel) or eager (step.py).
    FULL_TRACE traces every decoder layer instead of extrapolating from 2 and 3 (trace.trace_step)."""
    if tp < 1 or (fsdp is not None and fsdp < 1):
        raise PlanError("--tp and --fsdp must be positive")
    m = hardware.machine(instance, lnc, nodes)
    config, source = load_config(model)
    if fsdp is None:
        fsdp = max(1, m.world // tp)
    spec = StepSpec(tp=tp, fsdp=fsdp, seq=seq, batch=batch, dtype=dtype, optimizer=optimizer,
                    activation_checkpointing=activation_checkpointing, global_batch=global_batch, attention=attention)
    return plan_for(config, source, spec, m, model, full_trace)


def layouts(config, m: hardware.Machine) -> tuple[list[tuple[int, int]], dict[str, str]]:
    """Every (tp, fsdp) using all of M's cores that the model's heads and the platform's collectives allow, and why
    the others are not."""
    good, skipped = [], {}
    heads, kv = head_counts(config)
    for tp in range(1, m.world + 1):
        if m.world % tp:
            continue
        fsdp = m.world // tp
        name = f"TP={tp} x FSDP={fsdp}"
        if heads % tp or kv % tp:
            skipped[name] = f"TP does not divide the heads ({heads} attention, {kv} key/value)"
            continue
        try:
            hardware.check_layout(m, tp, fsdp)
        except PlanError as e:
            skipped[name] = str(e)
            continue
        good.append((tp, fsdp))
    return good, skipped


def _rank(p: Plan):
    # throughput, not step time: layouts with more FSDP ranks process more sequences per step
    return (not p.fits, -p.estimate.tokens_per_second if p.fits else -p.margin_bytes)


def sweep(model: str, instance: str = "trn2.48xlarge", seq: int = 2048, batch: int = 1, dtype: str = "bf16",
          optimizer: str = "adamw", activation_checkpointing: str | bool = "none", lnc: int | None = None,
          progress=None, full_trace: bool = False, nodes: int = 1, global_batch: int | None = None,
          attention: str = "sdpa") -> Sweep:
    """Plan every valid layout of NODES instances of INSTANCE; ranked: those that fit, highest estimated tokens/s
    first (a layout with more FSDP ranks takes more sequences per step), then the rest, closest to fitting first.
    PROGRESS(i, n, layout) is called before each. A GLOBAL_BATCH that a layout cannot split evenly skips it."""
    m = hardware.machine(instance, lnc, nodes)
    config, source = load_config(model)
    candidates, skipped = layouts(config, m)
    plans = []
    for i, (tp, fsdp) in enumerate(candidates):
        if global_batch is not None and global_batch % (batch * fsdp):
            skipped[f"TP={tp} x FSDP={fsdp}"] = f"global batch {global_batch} is not a multiple of {batch * fsdp}"
            continue
        if progress:
            progress(i, len(candidates), f"TP={tp} x FSDP={fsdp}")
        spec = StepSpec(tp=tp, fsdp=fsdp, seq=seq, batch=batch, dtype=dtype, optimizer=optimizer,
                        activation_checkpointing=activation_checkpointing, global_batch=global_batch,
                        attention=attention)
        plans.append(plan_for(config, source, spec, m, model, full_trace))
    plans.sort(key=_rank)
    return Sweep(plans=plans, skipped=skipped)
