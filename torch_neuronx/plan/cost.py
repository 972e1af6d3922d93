"""What a traced step asks of one core: its ops in order, each with the work it gives the engines and the buffers it
reads and writes, and the collectives it takes part in.

A TorchDispatchMode under the fake tensors: it sees every ATen op of rank 0 on its local shards (DTensor ops are
left to DTensor, which desugars them into local ops this mode then sees). Each op becomes an `Op`: its kind (a
matmul for TensorE, the flash-attention kernel, element-wise work for VectorE/ScalarE, data movement, a
collective), its FLOPs (PyTorch's flop_counter formulas; the attention kernel's own in flash_attention.py), the
buffers it reads and writes (an id per storage, so fusion.py can tell which tensors cross a fusion boundary) and the
phase it runs in (forward, backward, optimizer step). estimate.py turns the stream into time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from . import flash_attention

_COLLECTIVE_KINDS = {
    # c10d ops (FSDP2, dist.* calls) and functional collectives (DTensor redistribution, TP hooks)
    "allgather": "all_gather", "_allgather_base": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
    "all_gather_into_tensor": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "reducescatter_coalesced": "reduce_scatter",
    "allreduce": "all_reduce", "all_reduce": "all_reduce", "allreduce_coalesced": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "alltoall": "all_to_all", "alltoall_base": "all_to_all", "all_to_all_single": "all_to_all",
    "broadcast": "broadcast",
}

FORWARD, BACKWARD, OPTIMIZER = "forward", "backward", "optimizer"


def _grouped_mm_flops(a, b, *args, **kwargs) -> float:
    """torch._grouped_mm (Transformers' MoE experts): each of a's rows (2D, grouped by offs) or groups (3D) against
    its expert's matrix; whichever way a is grouped, 2 x a's elements x b's output columns."""
    return 2.0 * a.numel() * b.shape[-1]


# Matmuls PyTorch's flop_counter has no formula for.
_EXTRA_FLOPS = {"_grouped_mm": _grouped_mm_flops}

# Element-wise work by engine (NKI architecture guide): ScalarE evaluates the non-linear functions (its activation
# table); VectorE the operations combining elements (two-input arithmetic, reductions, comparisons, selects: _TWO_INPUT,
# _REDUCTIONS, _COMPOSITE_PASSES). One-input arithmetic runs on either; a graph compiler balances it (fusion.py gives
# it to the less busy engine).
_SCALAR_OPS = {"exp", "exp2", "expm1", "log", "log1p", "log2", "tanh", "sigmoid", "silu", "gelu", "erf", "rsqrt",
               "sqrt", "sin", "cos", "reciprocal", "softplus", "mish", "hardswish", "elu", "relu", "leaky_relu",
               "tanh_backward", "sigmoid_backward"}
# Ops that only move or cast data (no engine work: casts are free on the engines' inputs and outputs, copies are DMA).
_MOVE_OPS = {"_to_copy", "copy", "clone", "cat", "stack", "constant_pad_nd", "slice_backward", "select_backward",
             "index_select", "gather", "scatter", "index", "index_put", "index_add", "embedding",
             "embedding_dense_backward", "repeat", "repeat_interleave", "zeros", "zeros_like", "ones", "ones_like",
             "full", "full_like", "fill", "new_zeros", "new_ones", "new_full", "arange", "scalar_tensor",
             "lift_fresh", "lift_fresh_copy", "_foreach_copy", "_foreach_zero", "zero", "contiguous", "triu", "tril",
             "split_with_sizes_copy", "all_gather_copy_in", "chunk_cat", "masked_scatter", "roll", "flip"}
# Ops that allocate, inspect or describe (no work): views are skipped by is_view already.
_FREE_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_local_scalar_dense", "device",
             "detach", "alias", "_record_function_enter_new", "_record_function_exit", "resize_", "set_",
             "record_stream", "wait_tensor", "sym_size", "sym_stride", "sym_numel", "is_same_size",
             "_has_compatible_shallow_copy_type", "equal", "is_nonzero", "item", "size", "stride"}
# Two-input tensor-tensor ops: VectorE reads both inputs, ~2N cycles (NKI architecture guide, VectorE cost model).
_TWO_INPUT = {"add", "sub", "mul", "div", "where", "maximum", "minimum", "addcmul", "addcdiv", "lerp", "masked_fill",
              "silu_backward", "gelu_backward", "threshold_backward", "_softmax_backward_data",
              "_log_softmax_backward_data", "eq", "ne", "lt", "le", "gt", "ge"}
_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "var", "std", "norm", "linalg_vector_norm", "logsumexp",
               "argmax", "cumsum", "_foreach_norm"}
# Passes over the data a composite op makes on each engine: (vector, scalar) (softmax = max, exp, sum, scale...).
_COMPOSITE_PASSES = {"_softmax": (3, 1), "_log_softmax": (3, 1), "_softmax_backward_data": (3, 0),
                     "_log_softmax_backward_data": (2, 1), "native_layer_norm": (4, 1),
                     "native_layer_norm_backward": (8, 0), "_fused_rms_norm": (3, 1),
                     "_fused_rms_norm_backward": (6, 0),
                     "var_mean": (2, 0), "_fused_adamw": (10, 1), "_fused_adam": (10, 1), "_fused_sgd": (4, 0),
                     "native_dropout": (2, 0), "bernoulli": (1, 0), "sort": (8, 0), "topk": (4, 0)}


@dataclass(slots=True)
class Op:
    """One ATen op of rank 0's step (see module doc)."""
    name: str                         # aten op name, e.g. "mm", "_foreach_mul_"
    kind: str                         # matmul / attention / vector / move / collective
    phase: str                        # forward / backward / optimizer
    reads: tuple[tuple[int, int], ...]   # (buffer id, bytes) of tensor inputs
    writes: tuple[tuple[int, int], ...]  # (buffer id, bytes) of tensor outputs
    flops: float = 0.0
    fp32: bool = False                # a matmul with an FP32 operand (TensorE at a quarter rate)
    out_elements: int = 0             # matmul: output elements TensorE leaves in PSUM for VectorE/ScalarE to read out
    vector: float = 0.0               # VectorE element-passes
    scalar: float = 0.0               # ScalarE element-passes
    either: float = 0.0               # element-passes either engine can take
    sixteen_bit: bool = True          # the element-wise data is BF16/FP16 (wider data path on v3/v4)
    attention: flash_attention.Call | None = None
    collective: "Collective | None" = None


@dataclass
class Collective:
    kind: str          # all_gather / reduce_scatter / all_reduce / all_to_all / broadcast
    group_size: int
    ranks: tuple[int, ...]  # rank 0's group (which cores, so which chips and instances, the collective spans)
    bytes: int         # the full payload (the gathered output, the reduce-scatter input, the all-reduced tensor)
    count: int = 1
    blocking: bool = True   # a functional collective (TP, DTensor): the next op waits for it; False: FSDP2's c10d
    #                         collectives on their own stream, overlapped with compute (estimate.py)


@dataclass
class StepCost:
    """The traced step's cost: totals, and the op streams the estimate reads. A deep model's cost is the linear
    combination of two traced streams (extrapolated()): `streams` holds (ops, weight) pairs."""
    flops: float = 0.0
    hbm_bytes: float = 0.0            # every op's inputs + outputs, before fusion (fusion.py counts what remains)
    collectives: dict[tuple[str, tuple[int, ...]], Collective] = field(default_factory=dict)
    streams: list[tuple[list[Op], float]] = field(default_factory=list)
    forward_flops: float = 0.0        # the forward pass's FLOPs (model FLOPs = 3x: forward + backward's two matmuls)

    @staticmethod
    def extrapolated(a: "StepCost", b: "StepCost", k: float) -> "StepCost":
        """a + k (b - a): the cost of a model whose layer count lies k of the way from a's to b's and beyond
        (each added decoder layer costs what b's extra layers cost)."""
        lin = lambda x, y: x + k * (y - x)  # noqa: E731
        out = StepCost(lin(a.flops, b.flops), lin(a.hbm_bytes, b.hbm_bytes),
                       forward_flops=lin(a.forward_flops, b.forward_flops))
        out.streams = [(ops, w * (1 - k)) for ops, w in a.streams] + [(ops, w * k) for ops, w in b.streams]
        for key in set(a.collectives) | set(b.collectives):
            ca, cb = a.collectives.get(key), b.collectives.get(key)
            ref = ca or cb
            bytes_ = (ca.bytes if ca else 0) * (1 - k) + (cb.bytes if cb else 0) * k
            count = (ca.count if ca else 0) * (1 - k) + (cb.count if cb else 0) * k
            out.collectives[key] = Collective(ref.kind, ref.group_size, ref.ranks, max(0, round(bytes_)),
                                              max(0, round(count)), ref.blocking)
        return out


def _group_ranks(args) -> tuple[int, ...]:
    """The global ranks of the process group a collective's arguments name (a ProcessGroup or a group name)."""
    import torch.distributed as dist
    for a in args:
        pg = None
        if isinstance(a, dist.ProcessGroup):
            pg = a
        elif isinstance(a, torch.ScriptObject):
            try:
                pg = dist.ProcessGroup.unbox(a)  # c10d ops take the group boxed
            except (RuntimeError, TypeError):
                continue
        elif isinstance(a, str):
            try:
                pg = dist.distributed_c10d._resolve_process_group(a)  # functional collectives take its name
            except (ValueError, RuntimeError, KeyError):
                continue
        if pg is not None:
            return tuple(dist.get_process_group_ranks(pg))
    return (0,)


def _nbytes(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


class CostCounter(TorchDispatchMode):
    """Records rank 0's ops as a stream of `Op`s (see module doc)."""

    def __init__(self):
        super().__init__()
        self.cost = StepCost(streams=[([], 1.0)])
        self.ops: list[Op] = self.cost.streams[0][0]
        self._fake_mode_on_entry = None
        self._buffers: dict[int, tuple] = {}   # storage address -> (buffer id, StorageWeakRef)
        self._next_id = 0
        self._optimizer_depth = 0
        self._hooks = []

    def __enter__(self):
        from torch._guards import active_fake_mode
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        self._fake_mode_on_entry = active_fake_mode()

        def pre(*_):
            self._optimizer_depth += 1

        def post(*_):
            self._optimizer_depth -= 1
        self._hooks = [register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)]
        return super().__enter__()

    def __exit__(self, *exc):
        for h in self._hooks:
            h.remove()
        return super().__exit__(*exc)

    def _phase(self) -> str:
        if self._optimizer_depth:
            return OPTIMIZER
        return BACKWARD if torch._C._current_graph_task_id() != -1 else FORWARD

    def _storage_key(self, t: torch.Tensor) -> int | None:
        try:
            return t.untyped_storage()._cdata
        except (RuntimeError, NotImplementedError):
            return None

    def _known(self, t: torch.Tensor, key: int | None) -> int | None:
        """The buffer id of T's storage if this counter has seen that storage alive (an address a freed storage
        used is a new buffer: tensors made outside this mode, e.g. by another trace's garbage being collected, may
        land there)."""
        entry = self._buffers.get(key) if key is not None else None
        return entry[0] if entry is not None and not entry[1].expired() else None

    def _new_id(self, t: torch.Tensor, key: int | None) -> int:
        from torch.multiprocessing.reductions import StorageWeakRef
        self._next_id += 1
        if key is not None:
            self._buffers[key] = (self._next_id, StorageWeakRef(t.untyped_storage()))
        return self._next_id

    def _read_id(self, t: torch.Tensor) -> int:
        key = self._storage_key(t)
        known = self._known(t, key)
        return known if known is not None else self._new_id(t, key)

    def _write_id(self, t: torch.Tensor, read_keys: set) -> int:
        """An output's buffer: the input's when the op wrote in place (same storage), else a new one."""
        key = self._storage_key(t)
        known = self._known(t, key) if key in read_keys else None
        return known if known is not None else self._new_id(t, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.distributed.tensor import DTensor
        if any(t is DTensor for t in types):
            return NotImplemented  # let DTensor run its local ops through this mode
        from torch._guards import active_fake_mode
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if active_fake_mode() is not self._fake_mode_on_entry:
            return out  # DTensor's sharding propagation runs ops on its own fake tensors: not the step's work
        ns = func.namespace
        name = func._opname
        if ns in ("c10d", "_c10d_functional") and name.rstrip("_") in _COLLECTIVE_KINDS:
            kind = _COLLECTIVE_KINDS[name.rstrip("_")]
            ranks = _group_ranks(tree_flatten((args, kwargs))[0])
            tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
            payload = max((_nbytes(t) for t in tensors), default=0)
            if kind == "all_gather" and ns == "c10d":
                payload = max(payload, sum(_nbytes(t) for t in tree_flatten(args[0])[0]))
            self._collective(kind, ranks, payload, blocking=ns == "_c10d_functional", args=(args, kwargs), out=out)
            return out
        if func.is_view or ns in ("c10d", "_c10d_functional", "profiler", "prim"):
            return out
        base = name.rstrip("_")
        ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        read_keys = {self._storage_key(t) for t in ins}
        if base in _FREE_OPS:   # an allocation still names a new buffer: a later in-place write into it is not a
            for t in outs:      # write into whatever tensor lived at that address before
                self._write_id(t, read_keys)
            return out
        if not outs and name.endswith("_") and args:   # in-place ops returning nothing (_foreach_mul_) write args[0]
            outs = [t for t in tree_flatten(args[0])[0] if isinstance(t, torch.Tensor)]
        reads = tuple((self._read_id(t), _nbytes(t)) for t in ins)
        writes = tuple((self._write_id(t, read_keys), _nbytes(t)) for t in outs)
        op = Op(name=name, kind="vector", phase=self._phase(), reads=reads, writes=writes)
        call = flash_attention.parse(func, args, kwargs)
        if call is not None:
            op.kind, op.attention, op.flops = "attention", call, call.flops
        elif func._overloadpacket in flop_registry or name in _EXTRA_FLOPS:
            op.kind = "matmul"
            op.flops = float(_EXTRA_FLOPS[name](*args, **kwargs) if name in _EXTRA_FLOPS else
                             flop_registry[func._overloadpacket](*args, **kwargs, out_val=out))
            op.fp32 = any(t.dtype == torch.float32 for t in ins if t.is_floating_point())
            op.out_elements = sum(t.numel() for t in outs)
        elif base in _MOVE_OPS or base.startswith("_foreach_copy"):
            op.kind = "move"
        else:
            self._elementwise(op, base, args, ins, outs)
        self.cost.flops += op.flops
        if op.phase == FORWARD:
            self.cost.forward_flops += op.flops
        self.cost.hbm_bytes += sum(n for _, n in reads) + sum(n for _, n in writes)
        self.ops.append(op)
        return out

    @staticmethod
    def _elementwise(op: Op, base: str, args, ins, outs) -> None:
        """The element-passes an element-wise, reduction or optimizer op gives VectorE / ScalarE."""
        if base.startswith("_foreach"):   # lists of tensors: the first list is the data
            first = [t for t in tree_flatten(args[0])[0] if isinstance(t, torch.Tensor)] if args else []
            n = sum(t.numel() for t in first)
            two_lists = len(args) > 1 and isinstance(args[1], (list, tuple))
            data = first[0] if first else None
        else:
            n = max(sum(t.numel() for t in outs), max((t.numel() for t in ins), default=0))  # reductions read all
            # a second operand constant along the last (free) dimension, such as a per-row scale, is an
            # instruction's scalar operand (tensor_scalar: N cycles); two varying operands: tensor_tensor (2N)
            two_lists = sum(1 for t in ins if t.dim() and t.shape[-1] > 1 and t.numel() > 1) >= 2
            data = outs[0] if outs else (ins[0] if ins else None)
        op.sixteen_bit = data is not None and data.element_size() == 2
        if base in _COMPOSITE_PASSES:
            v, s = _COMPOSITE_PASSES[base]
            op.vector, op.scalar = v * n, s * n
        elif base in _SCALAR_OPS:
            op.scalar = n
        elif (base in _TWO_INPUT or base.startswith("_foreach")) and two_lists:
            op.vector = 2 * n
        elif base in _REDUCTIONS:
            op.vector = n
        else:
            op.either = n                 # one-input arithmetic (a scale, a shift, a square, a negation...)

    def _collective(self, kind: str, ranks: tuple[int, ...], payload: int, blocking: bool, args, out) -> None:
        if len(ranks) <= 1:
            return
        key = (kind, ranks)
        c = self.cost.collectives.get(key)
        if c is None:
            self.cost.collectives[key] = Collective(kind, len(ranks), ranks, payload, 1, blocking)
        else:
            c.bytes += payload
            c.count += 1
        ins = [t for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        read_keys = {self._storage_key(t) for t in ins}
        self.ops.append(Op(name=kind, kind="collective", phase=self._phase(),
                           reads=tuple((self._read_id(t), _nbytes(t)) for t in ins),
                           writes=tuple((self._write_id(t, read_keys), _nbytes(t)) for t in outs),
                           collective=Collective(kind, len(ranks), ranks, payload, 1, blocking)))
