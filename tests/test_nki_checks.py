"""Every NKI rule the emulator checks, each broken once: the error names the rule, points at the kernel line
that breaks it (marked `# <-` below) and says how to fix it. Rules and sources: torch_neuronx/nki/checks.py.
"""

from __future__ import annotations

import linecache

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki as bnki
import neuronxcc.nki.language as bnl
import neuronxcc.nki.typing as nt
from torch_neuronx.nki import NkiCapacityError, NkiError
from torch_neuronx.nki.errors import NkiCapacityWarning

DEV = "neuron"


def raises_at(rule: str, launch, *args, **kwargs) -> NkiError:
    with pytest.raises(NkiError) as info:
        launch(*args, **kwargs)
    e = info.value
    assert e.rule == rule, str(e)
    assert "# <-" in linecache.getline(e.filename, e.lineno), f"reported at {e.filename}:{e.lineno}: {e}"
    assert "Fix:" in str(e)
    return e


def t(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, device=DEV)


@nki.jit
def too_many_partitions(x):
    big = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.sbuf)  # <-
    nisa.dma_copy(dst=big, src=x)
    return x


def test_partition_dimension_at_most_128():
    e = raises_at("err_num_partition_exceed_arch_limit", too_many_partitions, t(256, 512))
    assert "number of partitions 256 exceed architecture limitation of 128" in str(e)


@nki.jit
def psum_tile_over_a_bank(x):
    ps = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)   # 4 KiB per partition: two banks
    nisa.memset(dst=ps, value=0.0)  # <-
    return x


@nki.jit
def matmul_output_across_banks(a, b):
    ps = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
    sa = nl.load(a)
    sb = nl.load(b)
    nisa.nc_matmul(dst=ps[:, 256:768], stationary=sa, moving=sb)  # <-
    return a


def test_psum_tile_is_one_bank():
    raises_at("err_psum_tile_exceeds_bank", psum_tile_over_a_bank, t(128, 4))
    raises_at("err_psum_tile_crosses_bank", matmul_output_across_banks, t(128, 128), t(128, 512))


@nki.jit
def matmul_shapes(a, b):
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    sa = nl.load(a)
    sb = nl.load(b)
    ps = nl.ndarray((min(a.shape[1], 128), b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=sa, moving=sb)  # <-
    r = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=ps)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_matmul_stationary_free_at_most_128():
    raises_at("err_matmul_stationary_free_size", matmul_shapes, t(128, 256), t(128, 64))


def test_matmul_moving_free_follows_generation(monkeypatch):
    raises_at("err_matmul_moving_free_size", matmul_shapes, t(128, 64), t(128, 1024))   # trn2: one bank, 512 fp32
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")   # NeuronCore-v4: up to 8 banks
    a, b = t(128, 64), t(128, 1024)
    torch.testing.assert_close(matmul_shapes(a, b).cpu(), a.cpu().T @ b.cpu(), rtol=1e-5, atol=1e-4)


def test_matmul_contracts_equal_partitions():
    raises_at("err_matmul_contraction_mismatch", matmul_shapes, t(128, 64), t(64, 64))


@nki.jit
def load_from_sbuf(x):
    s = nl.load(x)
    s2 = nl.load(s)  # <-
    return x


@nki.jit
def matmul_from_psum(a):
    sa = nl.load(a)
    ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=sa, moving=sa)
    ps2 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps2, stationary=ps, moving=sa)  # <-
    return a


@nki.jit
def gpsimd_on_psum(a):
    ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    sa = nl.load(a)
    nisa.tensor_copy(dst=ps, src=sa, engine=nisa.gpsimd_engine)  # <-
    return a


def test_operands_in_the_right_memory():
    e = raises_at("err_unsupported_memory", load_from_sbuf, t(128, 8))
    assert "Expected operand 'src' of 'load' to be in address space 'hbm', but got a tile in 'sbuf'" in str(e)
    e = raises_at("err_unsupported_memory", matmul_from_psum, t(128, 128))
    assert "'stationary' of 'nc_matmul'" in str(e)
    raises_at("err_unsupported_memory", gpsimd_on_psum, t(128, 128))


@nki.jit
def mixed_precision_matmul(a, b):
    sa = nl.load(a)
    sb = nl.load(b)
    ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=sa, moving=sb)  # <-
    return a


def test_matmul_fp32_pairs_with_fp32():
    raises_at("err_matmul_fp32_pairing", mixed_precision_matmul, t(128, 128), t(128, 128, dtype=torch.bfloat16))


@nki.jit
def bad_scale(x, scale_rows):
    s = nl.load(x)
    sc = nl.load(scale_rows)
    o = nl.ndarray(s.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=o, op=nl.exp, data=s, scale=sc)  # <-
    return x


@nki.jit
def bad_bias(x, bias):
    s = nl.load(x)
    b = nl.load(bias)
    o = nl.ndarray(s.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=o, op=nl.exp, data=s, bias=b)  # <-
    return x


def test_scale_and_bias_are_scalars_or_partition_vectors():
    raises_at("err_activation_scale_scalar_or_vector", bad_scale, t(128, 64), t(1, 128))
    raises_at("err_invalid_vector_operand", bad_bias, t(128, 64), t(128, 2))


@nki.jit
def partition_mismatch(a, b):
    sa = nl.load(a)
    sb = nl.load(b)
    o = nl.ndarray(sa.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=o, data1=sa, data2=sb, op=nl.add)  # <-
    return a


def test_operands_have_equal_partitions():
    e = raises_at("err_num_partition_mismatch", partition_mismatch, t(128, 512), t(1, 512))
    assert "data1[128, 512], data2[1, 512]" in str(e)


@nki.jit
def returns_private_hbm(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)  # <-
    nisa.dma_copy(dst=out, src=x)
    return out


def test_outputs_are_shared_hbm():
    e = raises_at("err_output_must_be_shared_hbm", lambda x: returns_private_hbm(x), t(128, 8))
    assert "nl.shared_hbm" in str(e)


@bnki.jit
def writes_input(in_tensor):
    x = bnl.load(in_tensor)
    bnl.store(in_tensor, value=x + 1)  # <-
    return in_tensor


@bnki.jit
def writes_mutable_without_returning(in_tensor: nt.mutable_tensor):  # <-
    out = bnl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=bnl.shared_hbm)
    x = bnl.load(in_tensor)
    bnl.store(out, value=x)
    bnl.store(in_tensor, value=x + 1)
    return out


def test_beta1_parameters_are_immutable_unless_annotated():
    e = raises_at("err_cannot_update_immutable_parameter", writes_input, t(128, 8))
    assert "Cannot update immutable parameter 'in_tensor'" in str(e) and "nt.mutable_tensor" in str(e)
    raises_at("err_mutable_parameter_not_returned", writes_mutable_without_returning, t(128, 8))


@nki.jit
def sbuf_overflow(x):
    tiles = []
    for i in range(8):   # 8 x 32 KiB live at once > 224 KiB per partition (NeuronCore-v3)
        tiles.append(nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf))  # <-
        nisa.memset(dst=tiles[-1], value=float(i))
    acc = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for tile in tiles:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=tile, op=nl.add)
    return x


@nki.jit
def sbuf_reuse(x):
    acc = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in range(8):   # the same 8 tiles, each dead before the next: 64 KiB live at most
        tile = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=tile, value=float(i))
        nisa.tensor_tensor(dst=acc, data1=acc, data2=tile, op=nl.add)
    return x


def test_sbuf_capacity_of_live_tiles(monkeypatch):
    e = raises_at("err_sbuf_capacity", sbuf_overflow, t(128, 4))
    assert isinstance(e, NkiCapacityError) and "229376 bytes per partition" in str(e)
    sbuf_reuse(t(128, 4))  # liveness, not allocation count, decides
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")   # NeuronCore-v2: 192 KiB per partition
    e = raises_at("err_sbuf_capacity", sbuf_overflow, t(128, 4))
    assert "196608 bytes per partition" in str(e)


@bnki.jit
def beta1_psum_blocks(a):
    """As AWS's attention tutorial v3: a PSUM tensor of 16 block tiles (32 KiB per partition) live at once."""
    out = bnl.ndarray((128, 512), dtype=bnl.float32, buffer=bnl.shared_hbm)
    sa = bnl.load(a)
    qk = bnl.ndarray((16, bnl.par_dim(128), 512), dtype=bnl.float32, buffer=bnl.psum)  # <-
    for i in bnl.affine_range(16):
        qk[i] = bnki.isa.nc_matmul(sa[:, 0:128], sa)
    acc = bnl.zeros((128, 512), dtype=bnl.float32)
    for i in bnl.sequential_range(16):
        acc[...] = acc + qk[i]
    bnl.store(out, value=acc)
    return out


def test_beta1_capacity_overflow_warns_as_its_compiler_spilled():
    a = t(128, 512)
    with pytest.warns(NkiCapacityWarning, match=r"(?s)\[err_psum_capacity\].*spills the overflow to SBUF"):
        out = beta1_psum_blocks(a)
    ac = a.cpu()
    torch.testing.assert_close(out.cpu(), 16 * (ac[:, :128].T @ ac), rtol=1e-4, atol=1e-3)


@nki.jit
def psum_overflow(a):
    sa = nl.load(a)
    results = []
    for i in range(9):   # 9 matmul outputs alive at once: PSUM has 8 banks
        ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)  # <-
        nisa.nc_matmul(dst=ps, stationary=sa, moving=sa)
        results.append(ps)
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for ps in results:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=ps, op=nl.add)
    return a


def test_psum_capacity_of_live_tiles():
    e = raises_at("err_psum_capacity", psum_overflow, t(128, 128))
    assert "8 banks" in str(e)


@bnki.jit
def affine_conflict(x):
    out = bnl.ndarray((128, 512), dtype=x.dtype, buffer=bnl.shared_hbm)
    a = bnl.ndarray((4, bnl.par_dim(128), 512), dtype=bnl.float32, buffer=bnl.sbuf)
    for i in bnl.affine_range(4):
        a[0] = bnl.load(x)  # <-
    bnl.store(out, value=a[0])
    return out


@bnki.jit
def affine_distinct(x):
    out = bnl.ndarray((128, 512), dtype=x.dtype, buffer=bnl.shared_hbm)
    a = bnl.ndarray((4, bnl.par_dim(128), 512), dtype=bnl.float32, buffer=bnl.sbuf)
    for i in bnl.affine_range(4):
        a[i] = bnl.load(x)
    for i in bnl.sequential_range(4):
        a[0] = a[0] + a[i]
    bnl.store(out, value=a[0])
    return out


def test_beta1_affine_range_iterations_write_distinct_locations():
    x = t(128, 512)
    e = raises_at("err_unexpected_output_dependencies", affine_conflict, x)
    assert "iterations 0 and 1" in str(e) and "sequential_range" in str(e)
    torch.testing.assert_close(affine_distinct(x).cpu(), 5 * x.cpu())


@nki.jit
def slice_out_of_bounds(x):
    s = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x[0:128, 100:164])  # <-
    return x


@bnki.jit
def masked_edge(x):
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    ip, iff = bnl.mgrid[0:128, 0:64]
    for i in bnl.affine_range(2):
        tile = bnl.load(x[ip, i * 64 + iff], mask=(i * 64 + iff < x.shape[1]))
        bnl.store(out[ip, i * 64 + iff], value=tile, mask=(i * 64 + iff < x.shape[1]))
    return out


@bnki.jit
def unmasked_edge(x):
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    ip, iff = bnl.mgrid[0:128, 0:64]
    for i in bnl.affine_range(2):
        tile = bnl.load(x[ip, i * 64 + iff])  # <-
        bnl.store(out[ip, i * 64 + iff], value=tile)
    return out


def test_out_of_bound_access_unless_masked():
    raises_at("err_tensor_access_out_of_bound", slice_out_of_bounds, t(128, 120))
    x = t(128, 100)
    torch.testing.assert_close(masked_edge(x).cpu(), x.cpu())
    e = raises_at("err_tensor_access_out_of_bound", unmasked_edge, x)
    assert "index range [64, 127] exceed dimension size of 100" in str(e)


@nki.jit
def accumulate_uninitialized(a):
    sa = nl.load(a)
    ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=sa, moving=sa, accumulate=True)  # <-
    return a


@nki.jit
def accumulate_onto_memset(a):
    sa = nl.load(a)
    ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=ps, value=0.0)
    nisa.nc_matmul(dst=ps, stationary=sa, moving=sa, accumulate=True)  # <-
    return a


def test_psum_accumulation_needs_a_matmul_start():
    raises_at("err_matmul_accumulate_uninitialized", accumulate_uninitialized, t(128, 128))
    raises_at("err_matmul_accumulate_non_matmul", accumulate_onto_memset, t(128, 128))


@nki.jit
def bf16_matmul_output(a):
    sa = nl.load(a)
    ps = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=sa, moving=sa)  # <-
    return a


def test_matmul_output_dtype_per_generation(monkeypatch):
    raises_at("err_matmul_dst_dtype", bf16_matmul_output, t(128, 128, dtype=torch.bfloat16))
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen4")
    bf16_matmul_output(t(128, 128, dtype=torch.bfloat16))


@nki.jit
def transpose_too_big(a):
    sa = nl.load(a)
    ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=ps, data=sa)  # <-
    return a


@nki.jit
def bn_stats_too_wide(a):
    sa = nl.load(a)
    st = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=st, data=sa)  # <-
    return a


def test_engine_size_limits():
    raises_at("err_size_of_dimension_exceed_arch_limit", transpose_too_big, t(128, 256))
    raises_at("err_size_of_dimension_exceed_arch_limit", bn_stats_too_wide, t(128, 1024))


@nki.jit
def uses_tile_operators(a):
    sa = nl.load(a)
    s2 = sa + sa  # <-
    return a


def test_nki_tensors_have_no_operators():
    e = raises_at("err_tensor_operator", uses_tile_operators, t(128, 8))
    assert "Use nki.isa directly" in str(e)


@nki.jit
def lnc_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


def test_lnc_launch_follows_the_generation(monkeypatch):
    a = t(128, 8)
    torch.testing.assert_close(lnc_kernel[2](a).cpu(), a.cpu())   # trn2 (default): LNC=2
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    with pytest.raises(NkiError, match=r"NeuronCore-v2 runs at most 1 logical core") as info:
        lnc_kernel[2](a)
    assert info.value.rule == "err_lnc_launch"


def test_bad_platform_target_names_the_values(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9")
    with pytest.raises(ValueError, match="trn1/inf2/gen2: NeuronCore-v2"):
        lnc_kernel(t(128, 8))


def test_errors_also_on_numpy_launches():
    with pytest.raises(NkiError) as info:
        nki.simulate(too_many_partitions)(np.zeros((256, 512), np.float32))
    assert info.value.rule == "err_num_partition_exceed_arch_limit"
