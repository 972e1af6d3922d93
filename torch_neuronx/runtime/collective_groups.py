"""Which collective groups a Neuron platform can run, checked when a process group is created.

Neuron's collectives run over the chips' links, and the runtime only builds the rings it has
algorithms for (AWS documentation; docs/fidelity.md):
  trn1/trn1n: 1, 2, 8, 16 or a multiple of 32 cores; any other count fails with "Unsupported
              topology" (e.g. 24 cores). trn1.2xlarge has no links: groups of its 1 or 2 cores.
  inf2:       a ring: any count of contiguous cores.
  trn2/trn3:  AWS documents no group-size restriction for Trainium2 (NeuronLink-v3 torus) or
              Trainium3 (NeuronSwitch all-to-all), and its Trn2 training guides use groups of 2, 4, 8,
              16, 32 and 64 ranks: every size is accepted.

`valid_collective_group_sizes(instance, up_to)` lists the sizes (for `torchneuron plan`);
`check_collective_group(size, ranks, instance)` raises CollectiveTopologyError naming the valid sizes.
The c10d backend "neuron" calls the check for every group it creates (init_process_group, new_group,
split_group, each DeviceMesh dimension).
"""

from __future__ import annotations

from .topology import InstanceType, TopologyError, instance_type


class CollectiveTopologyError(TopologyError):
    """A process group the platform's collectives cannot run over."""


def _instance(instance: str | InstanceType) -> InstanceType:
    if isinstance(instance, InstanceType):
        return instance
    return instance_type(instance)


def _trn1_ok(size: int) -> bool:
    return size in (1, 2, 8, 16) or size % 32 == 0


def valid_collective_group_sizes(instance: str | InstanceType, up_to: int | None = None) -> list[int]:
    """Group sizes (1..up_to, default: the instance's cores at its default LNC) the platform accepts."""
    inst = _instance(instance)
    limit = up_to if up_to is not None else inst.cores(inst.default_lnc)
    if inst.chip == "Trainium1":
        return [n for n in range(1, limit + 1) if _trn1_ok(n)]
    return list(range(1, limit + 1))


def _describe(inst: InstanceType) -> str:
    if inst.chip == "Trainium1":
        return "1, 2, 8, 16 or a multiple of 32 cores"
    if inst.chip == "Inferentia2":
        return "a ring of contiguous cores (any count)"
    return "any number of cores"


def check_collective_group(size: int, ranks: list[int] | None = None,
                           instance: str | InstanceType | None = None) -> None:
    """Raise CollectiveTopologyError if `size` ranks (global `ranks`, if known) cannot form a group here."""
    if instance is None:  # this process's instance, without starting the runtime (a group may bind it first)
        from .. import runtime
        instance = runtime.topology().instance if runtime.started() else runtime.instance_name()
    inst = _instance(instance)
    if inst.chip == "Trainium1" and not _trn1_ok(size):
        below = max(n for n in range(1, size) if _trn1_ok(n))
        above = next(n for n in range(size + 1, size + 33) if _trn1_ok(n))
        raise CollectiveTopologyError(
            f"Unsupported topology: a collective group of {size} ranks on {inst.name} ({inst.chip}). Neuron's "
            f"collectives on Trainium1 run over {_describe(inst)}. Use a group of {below} or {above} ranks "
            f"(change the tensor/data parallel degrees or the DeviceMesh shape).")
    if inst.chip == "Inferentia2" and ranks is not None and len(ranks) > 1:
        ordered = sorted(ranks)
        if ordered != list(range(ordered[0], ordered[0] + len(ordered))):
            raise CollectiveTopologyError(
                f"Unsupported topology: the collective group {ranks} on {inst.name} is not contiguous. "
                f"Inferentia2 chips are linked in a ring: a group must be {_describe(inst)}, e.g. ranks "
                f"{list(range(ordered[0], ordered[0] + len(ordered)))}.")
