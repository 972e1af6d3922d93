"""plan(): will this training step fit each NeuronCore of an instance, and how fast would it run; sweep(): every
layout the instance and the model allow, ranked.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from . import hardware
from .config import PlanError, check_tp, head_counts, load_config, tp_degrees_for_heads
from .estimate import StepTime, estimate
from .step import DTYPES, OPTIMIZERS, StepSpec
from .trace import CATEGORIES, trace_step


@dataclass
class Plan:
    model: str
    source: str
    parameters: int
    instance: str
    lnc: int
    cores: int
    tp: int
    fsdp: int
    seq: int
    batch: int
    dtype: str
    optimizer: str
    activation_checkpointing: bool
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
    if spec.seq < 1 or spec.batch < 1 or spec.tp < 1 or spec.fsdp < 1:
        raise PlanError("--seq, --batch, --tp and --fsdp must be positive")
    if spec.world > m.cores:
        raise PlanError(f"TP={spec.tp} x FSDP={spec.fsdp} needs {spec.world} cores; {m.name} at LNC={m.lnc} has "
                        f"{m.cores}")
    check_tp(config, spec.tp, hardware.valid_group_sizes(m))
    hardware.check_layout_groups(m, spec.tp, spec.fsdp)


def plan_for(config, source: str, spec: StepSpec, m: hardware.Machine, model_name: str,
             full_trace: bool = False) -> Plan:
    """The plan of a loaded CONFIG (see plan())."""
    _validate(spec, m, config)
    trace = trace_step(config, spec, full=full_trace)
    by_category = {c: trace.by_category[c] for c in CATEGORIES}
    by_category["runtime_reserve"] = m.reserve_per_core
    peak = sum(by_category.values())
    return Plan(model=model_name, source=source, parameters=trace.parameters, instance=m.name, lnc=m.lnc,
                cores=m.cores, tp=spec.tp, fsdp=spec.fsdp, seq=spec.seq, batch=spec.batch, dtype=spec.dtype,
                optimizer=spec.optimizer, activation_checkpointing=spec.activation_checkpointing,
                hbm_per_core=m.hbm_per_core, peak_per_core=peak, by_category=by_category,
                fits=peak <= m.hbm_per_core, margin_bytes=m.hbm_per_core - peak,
                estimate=estimate(trace.cost, m, spec), trace_seconds=trace.trace_seconds, notes=list(trace.notes))


def plan(model: str, instance: str = "trn2.48xlarge", tp: int = 1, fsdp: int | None = None, seq: int = 2048,
         batch: int = 1, dtype: str = "bf16", optimizer: str = "adamw", activation_checkpointing: bool = False,
         lnc: int | None = None, full_trace: bool = False) -> Plan:
    """Plan one training step of MODEL (preset name, config.json or model directory) on INSTANCE with a
    TP x FSDP layout (fsdp defaults to the cores TP leaves: the whole instance). BATCH is per FSDP rank.
    FULL_TRACE traces every decoder layer instead of extrapolating from 2 and 3 (trace.trace_step)."""
    if tp < 1 or (fsdp is not None and fsdp < 1):
        raise PlanError("--tp and --fsdp must be positive")
    m = hardware.machine(instance, lnc)
    config, source = load_config(model)
    if fsdp is None:
        fsdp = max(1, m.cores // tp)
    spec = StepSpec(tp=tp, fsdp=fsdp, seq=seq, batch=batch, dtype=dtype, optimizer=optimizer,
                    activation_checkpointing=activation_checkpointing)
    return plan_for(config, source, spec, m, model, full_trace)


def layouts(config, m: hardware.Machine) -> tuple[list[tuple[int, int]], dict[str, str]]:
    """Every (tp, fsdp) using all of M's cores that the model's heads and the platform's group sizes allow,
    and why the others are not."""
    ok_tp = set(tp_degrees_for_heads(config, hardware.valid_group_sizes(m)))
    good, skipped = [], {}
    for tp in range(1, m.cores + 1):
        if m.cores % tp:
            continue
        fsdp = m.cores // tp
        name = f"TP={tp} x FSDP={fsdp}"
        if tp not in ok_tp:
            heads, kv = head_counts(config)
            skipped[name] = (f"TP does not divide the heads ({heads} attention, {kv} key/value)"
                             if heads % tp or kv % tp else f"a group of {tp} cores is not valid on {m.chip}")
            continue
        try:
            hardware.check_layout_groups(m, tp, fsdp)
        except PlanError as e:
            skipped[name] = str(e)
            continue
        good.append((tp, fsdp))
    return good, skipped


def _rank(p: Plan):
    # throughput, not step time: layouts with more FSDP ranks process more sequences per step
    return (not p.fits, -p.estimate.tokens_per_second if p.fits else -p.margin_bytes)


def sweep(model: str, instance: str = "trn2.48xlarge", seq: int = 2048, batch: int = 1, dtype: str = "bf16",
          optimizer: str = "adamw", activation_checkpointing: bool = False, lnc: int | None = None,
          progress=None, full_trace: bool = False) -> Sweep:
    """Plan every valid layout of INSTANCE; ranked: those that fit, highest estimated tokens/s first (the step
    time per token: a layout with more FSDP ranks takes more sequences per step), then the rest, closest to
    fitting first. PROGRESS(i, n, layout) is called before each."""
    m = hardware.machine(instance, lnc)
    config, source = load_config(model)
    candidates, skipped = layouts(config, m)
    plans = []
    for i, (tp, fsdp) in enumerate(candidates):
        if progress:
            progress(i, len(candidates), f"TP={tp} x FSDP={fsdp}")
        spec = StepSpec(tp=tp, fsdp=fsdp, seq=seq, batch=batch, dtype=dtype, optimizer=optimizer,
                        activation_checkpointing=activation_checkpointing)
        plans.append(plan_for(config, source, spec, m, model, full_trace))
    plans.sort(key=_rank)
    return Sweep(plans=plans, skipped=skipped)
