"""How long one collective takes on the links its group spans, as Neuron's collective algorithms use them.

AWS describes the algorithms (neuron-runtime/explore/intranode-collective-comm.rst, internode-collective-comm.rst):

  between instances  a group with ranks on X instances, Y on each, runs hierarchically: an all-gather is an
                     inter-instance all-gather among the X ranks of each local index (each moves (X-1)/X of its
                     1/Y of the payload over EFA), then an intra-instance all-gather among the Y (a reduce-scatter
                     is the mirror image, an all-reduce both). Every core of an instance takes part at once (TP and
                     FSDP groups are symmetric), so a rank gets its instance's EFA bandwidth over the instance's
                     ranks ("each rank gets 3.2 Tbps / 64"). Per step ~15 us; recursive doubling/halving takes
                     log2(X) steps.
  between chips      over NeuronLink. KangaRing (large messages) has one rank per chip receive each chunk and
                     duplicate the write to its chip's other ranks, so a chip takes in (C-1)/C of the payload once
                     for C chips in the group; the chip's links are shared by the groups with ranks on it. Per hop
                     about 1-2 us.
  inside a chip      ranks on one chip exchange through its HBM: (R-1)/R of the payload at the core's DMA rate.

An all-reduce is a reduce-scatter then an all-gather (twice the traffic); an all-to-all moves (g-1)/g of the
payload like an all-gather; a broadcast the whole payload once.
"""

from __future__ import annotations

import math

from .cost import Collective
from .hardware import HOP_LATENCY_INTER, HOP_LATENCY_INTRA, Machine


def _span(c: Collective, m: Machine) -> tuple[int, int, int, int]:
    """(instances X, ranks per instance Y, chips per instance C, ranks per chip R) of the group, the largest of each
    (groups are symmetric in a TP x FSDP layout)."""
    nodes: dict[int, set[int]] = {}
    chips: dict[tuple[int, int], int] = {}
    for r in c.ranks:
        node, chip = m.place(r)
        nodes.setdefault(node, set()).add(chip)
        chips[(node, chip)] = chips.get((node, chip), 0) + 1
    per_node = max(sum(chips[(n, ch)] for ch in cs) for n, cs in nodes.items())
    return len(nodes), per_node, max(len(cs) for cs in nodes.values()), max(chips.values())


def seconds(c: Collective, m: Machine) -> float:
    """Time of one collective C (its payload c.bytes) on machine M."""
    g = c.group_size
    if g <= 1 or c.bytes <= 0:
        return 0.0
    if c.kind == "all_reduce":
        return 2 * _gather_like(c, m, c.bytes)
    if c.kind == "broadcast":
        return _gather_like(c, m, c.bytes) * g / max(1, g - 1)
    return _gather_like(c, m, c.bytes)


def _gather_like(c: Collective, m: Machine, payload: float) -> float:
    """An all-gather (or its mirror, a reduce-scatter) of PAYLOAD bytes over C's group."""
    x, y, chips, per_chip = _span(c, m)
    t = 0.0
    if x > 1:
        efa_per_rank = m.efa_bytes_per_s / m.cores
        t += (x - 1) / x * (payload / y) / efa_per_rank + math.ceil(math.log2(x)) * HOP_LATENCY_INTER
    if y > 1:
        if chips > 1:
            groups_on_chip = m.cores_per_chip / per_chip          # groups sharing each chip's links
            link = m.link_bytes_per_s_per_chip / groups_on_chip
            t += (chips - 1) / chips * payload / link + (chips - 1) * HOP_LATENCY_INTRA
        else:
            t += (per_chip - 1) / per_chip * payload / m.dma_bytes_per_s + HOP_LATENCY_INTRA
    return t


def link_of(c: Collective, m: Machine) -> str:
    """Which interconnect carries C: "EFA", "NeuronLink" or "on-chip"."""
    x, y, chips, _ = _span(c, m)
    return "EFA" if x > 1 else "NeuronLink" if chips > 1 else "on-chip"
