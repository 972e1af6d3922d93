"""Trace one steady-state training step of rank 0 with fake tensors: per-core peak HBM by category, and its cost.

The step is step.py's, the one bench/plan_accuracy.py runs for real. Memory is counted by PyTorch's own trackers
(torch.distributed._tools: MemTracker, and FSDPMemTracker when FSDP2 shards the model), which follow every
tensor storage the step creates and frees, exactly as the emulator's allocator counts device memory (each
storage's bytes, no rounding, no caching). The optimizer state is created before the traced step (a step on
zero gradients, untraced) so the traced step is what every step after the first costs.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field

import torch

from . import step as step_mod
from .config import PlanError
from .cost import CostCounter, StepCost
from .world import fake_world

# The categories a plan reports, and the trackers' reference types behind each.
CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "temporaries", "collective_buffers")
_CATEGORY_OF = {
    # MemTracker (_MemRefType)
    "Parameter": "parameters", "Buffer": "parameters", "Gradient": "gradients", "Activation": "activations",
    "Temp": "temporaries", "Optstate": "optimizer_state", "Other": "activations",
    # FSDPMemTracker (_FSDPRefType)
    "Sharded Param": "parameters", "Unsharded Param": "collective_buffers", "Sharded Grad": "gradients",
    "Unsharded Grad": "collective_buffers", "All Gather": "collective_buffers",
    "Reduce Scatter": "collective_buffers", "OptState": "optimizer_state", "Inputs": "activations",
}


@dataclass
class Trace:
    peak_bytes: int                       # rank 0's peak tensor bytes in the step
    by_category: dict[str, int]           # the same peak, split (sums to peak_bytes)
    cost: StepCost
    parameters: int                       # the model's parameter count (global)
    trace_seconds: float
    notes: list[str] = field(default_factory=list)


def _param_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def _create_optimizer_state(model, optimizer) -> None:
    """The state a first step leaves behind (AdamW's moments, SGD's momentum), made by a step on zero gradients."""
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def layer_period(config) -> int:
    """How many decoder layers make one repeating unit (1, or the period of the config's layer_types list:
    sliding/full attention alternation, dense/MoE alternation...)."""
    text = config.get_text_config()
    types = getattr(text, "layer_types", None)
    if not types:
        return 1
    for p in range(1, len(types) + 1):
        if all(types[i] == types[i % p] for i in range(len(types))):
            return p
    return len(types)


def with_layers(config, n: int):
    """A copy of CONFIG with N decoder layers (its per-layer lists cut to N)."""
    import copy
    config = copy.deepcopy(config)
    text = config.get_text_config()
    text.num_hidden_layers = n
    types = getattr(text, "layer_types", None)
    if isinstance(types, list):
        text.layer_types = types[:n]
    return config


def trace_step(config, spec: step_mod.StepSpec, full: bool = False) -> Trace:
    """Rank 0's steady-state step of CONFIG under SPEC, with every tensor fake and the world of spec.world ranks
    simulated in this process.

    A deep model is not traced whole (tracing costs seconds per decoder layer): the model is traced with 2 and with
    3 repeating units of decoder layers, and memory and cost are extrapolated linearly to the real layer count
    (every further unit adds what the third added: its parameters, gradients, optimizer state and saved
    activations; the embedding, head and loss are traced as they are). FULL traces every layer;
    tests/test_plan.py and docs/plan.md compare the two on small models."""
    layers = config.get_text_config().num_hidden_layers
    period = layer_period(config)
    small, large = 2 * period, 3 * period
    start = time.perf_counter()
    if spec.world > 1:
        # DTensor's sharding propagation runs ops of its own under the same fake mode the first time it meets an
        # op; a one-unit warm-up trace fills its cache, so the counted traces hold only the step's ops.
        _trace_once(with_layers(config, min(period, layers)), spec)
    if full or layers <= large:
        trace = _trace_once(config, spec)
        trace.trace_seconds = time.perf_counter() - start
        return trace
    a = _trace_once(with_layers(config, small), spec)
    b = _trace_once(with_layers(config, large), spec)
    k = (layers - small) / (large - small)
    by_category = {c: max(0, round(a.by_category[c] + k * (b.by_category[c] - a.by_category[c]))) for c in CATEGORIES}
    return Trace(peak_bytes=sum(by_category.values()), by_category=by_category,
                 cost=StepCost.extrapolated(a.cost, b.cost, k),
                 parameters=round(a.parameters + k * (b.parameters - a.parameters)),
                 trace_seconds=time.perf_counter() - start,
                 notes=[f"traced with {small} and {large} of the {layers} decoder layers and extrapolated linearly "
                        f"(docs/plan.md: agrees with a full trace on small models); --full-trace traces every layer"])


def _trace_once(config, spec: step_mod.StepSpec) -> Trace:
    from torch._subclasses.fake_tensor import FakeTensorMode

    start = time.perf_counter()
    with fake_world(spec.world):
        mesh = step_mod.make_mesh(spec)
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        with fake_mode:
            model = step_mod.create_model(config, spec, torch.device("neuron", 0))
        try:
            model = step_mod.distribute(model, spec, mesh)
        except ValueError as e:  # Transformers' own checks: no TP / FSDP plan for this architecture, ...
            raise PlanError(f"Transformers cannot shard {type(model).__name__} as TP={spec.tp} x FSDP={spec.fsdp}: "
                            f"{e}") from None
        _check_fake(model)
        with fake_mode:
            trace = _trace(config, spec, model)
    gc.collect()
    trace.trace_seconds = time.perf_counter() - start
    return trace


def _check_fake(model) -> None:
    """Every parameter and buffer is fake (a real one would be host memory of the full model size)."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.distributed.tensor import DTensor
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        local = t._local_tensor if isinstance(t, DTensor) else t
        if not isinstance(local, FakeTensor):
            raise RuntimeError(f"plan: {name} became a real tensor while sharding; the trace would allocate it")


def _real_foreach(model) -> bool:
    """The update torch.optim picks by default for the REAL parameters: the multi-tensor (foreach) one, whose
    temporaries span every parameter at once, on neuron (a foreach device) when each parameter is a Tensor,
    Parameter or DTensor; per tensor for a group mixing DTensor and plain tensors (TP only:
    torch_neuronx/integrations/optim_foreach.py). Left to its default under FakeTensorMode torch would see
    FakeTensor parameters, not one of those types, and take the per-tensor loop: a one-core plan would miss the
    foreach temporaries that make its optimizer step the peak."""
    from ..integrations.optim_foreach import is_mixed
    return not is_mixed(list(model.parameters()))


def _trace(config, spec, model) -> Trace:
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed.fsdp import FSDPModule

    device = torch.device("neuron", 0)
    optimizer = step_mod.make_optimizer(model, spec, foreach=_real_foreach(model))
    _create_optimizer_state(model, optimizer)
    batch = step_mod.make_batch(config, spec, device)
    if isinstance(model, FSDPModule):
        tracker = FSDPMemTracker(model, optimizer)
        tracker.track_inputs((batch,))
    else:
        tracker = MemTracker()
        tracker.track_external(model, optimizer, batch)
    counter = CostCounter()
    with tracker, counter:
        step_mod.train_step(model, optimizer, batch)
    peak = tracker.get_tracker_snapshot("peak")
    snap = peak.get(device) or next(iter(peak.values()), {})
    by_category = dict.fromkeys(CATEGORIES, 0)
    for ref, nbytes in snap.items():
        if ref == "Total":
            continue
        by_category[_CATEGORY_OF[getattr(ref, "value", ref)]] += nbytes
    params = _param_count(model)
    return Trace(peak_bytes=sum(by_category.values()), by_category=by_category, cost=counter.cost,
                 parameters=params, trace_seconds=0.0)
