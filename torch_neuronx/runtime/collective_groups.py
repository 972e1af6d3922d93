"""Which sets of cores a Neuron platform's collectives can run over, checked when a job's process group is made.

Neuron's collectives run over the chips' links, and the runtime only loads the collective programs it has
algorithms for (AWS documentation and error reports; docs/fidelity.md):
  trn1/trn1n: the job's collectives span 1, 2, 8, 16 or a multiple of 32 cores; any other count fails with
              "nrt_load_collectives: Unsupported topology. Supported number of Neuron Cores is 1, 2, 8, 16 or a
              multiple of 32" (e.g. 24 cores: aws-neuron-sdk/optimum-neuron reports such as optimum-neuron #424,
              #619). The count is the job's world on its instances (NEURON_RT_NUM_CORES / the ranks launched),
              not each replica group inside it: AWS's own published trn1 runs use TP 8 x DP 4 on one
              trn1.32xlarge (GPT3-6.7B, DP groups of 4 cores) and TP 8 x DP 4 x PP 4 (Llama2-7B, PP groups of
              4), so groups of 4 inside a 32-core world run. trn1.2xlarge has no links: worlds of its 1 or 2 cores.
  inf2:       a ring: any count of contiguous cores (a job's visible cores are one contiguous range).
  trn2/trn3:  AWS documents no size restriction for Trainium2 (NeuronLink-v3 torus) or Trainium3 (NeuronSwitch
              all-to-all), and its Trn2 training guides use 2 to 64 ranks: every size is accepted.

`valid_collective_group_sizes(instance, up_to)` lists the world sizes (for `torchneuron plan`);
`check_collective_group(size, ranks, instance)` raises CollectiveTopologyError naming the valid sizes for a world
(ranks None: the default group) and accepts every sub-group of a valid world. The c10d backend "neuron" calls it for
every group it creates (init_process_group, new_group, split_group, each DeviceMesh dimension).
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
    """Raise CollectiveTopologyError if a job's world of `size` ranks (`ranks` None: the default group) cannot run
    collectives here. A sub-group (`ranks` given: TP, DP or PP replica groups, DeviceMesh dimensions) of a world the
    platform accepts runs whatever its size: the rule counts the cores the job's collectives are loaded on."""
    if ranks is not None:
        return
    if instance is None:  # this process's instance, without starting the runtime (a group may bind it first)
        from .. import runtime
        instance = runtime.topology().instance if runtime.started() else runtime.instance_name()
    inst = _instance(instance)
    if inst.chip == "Trainium1" and not _trn1_ok(size):
        below = max(n for n in range(1, size) if _trn1_ok(n))
        above = next(n for n in range(size + 1, size + 33) if _trn1_ok(n))
        raise CollectiveTopologyError(
            f"Unsupported topology: a job of {size} ranks on {inst.name} ({inst.chip}). Neuron's collectives on "
            f"Trainium1 run over {_describe(inst)} (the job's whole world; groups inside it may have any size). "
            f"Launch {below} or {above} ranks (change the number of processes or instances).")
