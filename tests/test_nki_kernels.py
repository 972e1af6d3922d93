"""NKI kernels from the public tutorials' algorithms, on `neuron` tensors, against PyTorch references.

Each kernel is our own code for a documented algorithm (aws-neuron-sdk nki/examples, nki-samples tutorials;
docs/nki.md): tensor add (tiled, LNC and beta-1 SPMD grids), the matmul tutorial's tiled kernel (NKI 0.3+ and
beta 1), RMSNorm (beta 1: arange indices, masks, affine_range), LayerNorm with bn_stats/bn_aggr, softmax with
ScalarE's reduce registers. The numerics tests pin the documented arithmetic: fp32 engines with one RNE rounding
to the destination, fp32 PSUM accumulation, DMA conversion through fp32, saturating float -> int, NaN in
memory nobody wrote.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki as bnki
import neuronxcc.nki.isa as bnisa
import neuronxcc.nki.language as bnl
import neuronxcc.nki.typing as nt

DEV = "neuron"


# -- tensor add --------------------------------------------------------------------------------------------

@nki.jit
def add_tiled(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    P, F = nl.tile_size.pmax, 512
    for i in range(rows // P):
        for j in range(cols // F):
            ta = nl.ndarray((P, F), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((P, F), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[i * P:(i + 1) * P, j * F:(j + 1) * F])
            nisa.dma_copy(dst=tb, src=b[i * P:(i + 1) * P, j * F:(j + 1) * F])
            tc = nl.ndarray((P, F), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[i * P:(i + 1) * P, j * F:(j + 1) * F], src=tc)
    return out


def test_tensor_add_tiled():
    a, b = torch.randn(256, 1024), torch.randn(256, 1024)
    out = add_tiled(a.to(DEV), b.to(DEV))
    assert out.device.type == "neuron" and out.shape == a.shape
    torch.testing.assert_close(out.cpu(), a + b, rtol=0, atol=0)


@nki.jit
def add_lnc(a, b):
    """One half of the rows per logical core (kernel[2]), as AWS's LNC overview divides work."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    half = a.shape[0] // nl.num_programs()
    i = nl.program_id(0)
    ta = nl.load(a[i * half:(i + 1) * half, :])
    tb = nl.load(b[i * half:(i + 1) * half, :])
    nl.store(out[i * half:(i + 1) * half, :], nl.add(ta, tb))
    return out


def test_tensor_add_lnc2():
    a, b = torch.randn(256, 64), torch.randn(256, 64)
    out = add_lnc[2](a.to(DEV), b.to(DEV))   # trn2's default LNC=2: two programs, program_id 0 and 1
    torch.testing.assert_close(out.cpu(), a + b, rtol=0, atol=0)


@bnki.jit
def add_spmd(a_input, b_input):
    """beta 1 (nki-samples spmd_tensor_addition): one [128, 512] tile per program of a 2-D grid."""
    c_output = bnl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=bnl.shared_hbm)
    ix = bnl.program_id(0) * 128 + bnl.arange(128)[:, None]
    iy = bnl.program_id(1) * 512 + bnl.arange(512)[None, :]
    a_tile = bnl.load(a_input[ix, iy])
    b_tile = bnl.load(b_input[ix, iy])
    c_tile = a_tile + b_tile
    bnl.store(c_output[ix, iy], value=c_tile)
    return c_output


def test_tensor_add_spmd_grid_beta1():
    a, b = torch.randn(256, 1024, dtype=torch.bfloat16), torch.randn(256, 1024, dtype=torch.bfloat16)
    out = add_spmd[2, 2](a.to(DEV), b.to(DEV))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), a + b, rtol=0, atol=0)   # fp32 add, one bf16 rounding = torch's


# -- matmul tutorial -----------------------------------------------------------------------------------------

@nki.jit
def matmul_tiled(lhsT, rhs):
    """The matmul tutorial's tiled kernel (NKI 0.3+): result[M, N] = lhsT.T @ rhs, K accumulated in PSUM."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_K = nl.tile_size.pmax
    TILE_N = nl.tile_size.gemm_moving_fmax
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)
            res_sb = nl.ndarray(res_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=res_sb)
    return result


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matmul_tiled(dtype):
    lhsT, rhs = torch.randn(256, 256, dtype=dtype), torch.randn(256, 1024, dtype=dtype)
    out = matmul_tiled(lhsT.to(DEV), rhs.to(DEV))
    ref = (lhsT.float().T @ rhs.float()).to(dtype)   # fp32 products and sums, one rounding
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-1)
    torch.testing.assert_close(out.cpu(), ref, **tol)


@bnki.jit
def matmul_tiled_beta1(lhsT, rhs):
    """The same tutorial kernel in beta 1: nl.matmul(transpose_x=True) accumulated with `res_psum += ...`."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    result = bnl.ndarray((M, N), dtype=lhsT.dtype, buffer=bnl.shared_hbm)
    for m in bnl.affine_range(M // 128):
        for n in bnl.affine_range(N // 512):
            res_psum = bnl.zeros((128, 512), bnl.float32, buffer=bnl.psum)
            for k in bnl.affine_range(K // 128):
                lhsT_tile = bnl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                rhs_tile = bnl.load(rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                res_psum += bnl.matmul(lhsT_tile, rhs_tile, transpose_x=True)
            res_sb = bnl.copy(res_psum, dtype=result.dtype)
            bnl.store(result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=res_sb)
    return result


def test_matmul_tiled_beta1():
    lhsT, rhs = torch.randn(384, 128), torch.randn(384, 512)
    out = matmul_tiled_beta1(lhsT.to(DEV), rhs.to(DEV))
    torch.testing.assert_close(out.cpu(), lhsT.T @ rhs, rtol=1e-5, atol=1e-4)


# -- normalizations and softmax -----------------------------------------------------------------------------

@bnki.jit
def rmsnorm_beta1(a_tensor, g_tensor):
    """RMSNorm as the beta-1 tutorial computes it: rows on partitions, the last tile masked."""
    out_tensor = bnl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=bnl.shared_hbm)
    ix = bnl.arange(128)[:, None]
    iw = bnl.arange(1)[:, None]
    iy = bnl.arange(a_tensor.shape[1])[None, :]
    num_rows = a_tensor.shape[0]
    g_tile = bnl.load(g_tensor.reshape((1, g_tensor.shape[0]))[iw, iy])
    for i in bnl.affine_range(math.ceil(num_rows / 128)):
        a_tile = bnl.load(a_tensor[i * 128 + ix, iy], mask=(i * 128 + ix < num_rows))
        in_square = bnl.square(a_tile)
        square_sum = bnl.sum(in_square, axis=[1])
        mean = square_sum / a_tensor.shape[1]
        rms_reciprocal = bnl.rsqrt(mean)
        out_tile = bnl.multiply(a_tile, rms_reciprocal)
        g_bcast = g_tile.broadcast_to((128, g_tensor.shape[0]))
        out_tile[...] = bnl.multiply(out_tile, g_bcast, mask=(i * 128 + ix < num_rows))
        bnl.store(out_tensor[i * 128 + ix, iy], value=out_tile, mask=(i * 128 + ix < num_rows))
    return out_tensor


def test_rmsnorm_beta1_masked_rows():
    a, g = torch.randn(300, 96), torch.randn(96)
    out = rmsnorm_beta1(a.to(DEV), g.to(DEV))
    ref = a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True)) * g     # fp32 intermediates
    np.testing.assert_allclose(out.cpu().numpy(), ref.numpy(), rtol=1e-2, atol=1e-4)  # the tutorial's tolerance


@nki.jit
def layernorm(x, gamma, beta, eps):
    """LayerNorm with bn_stats (512-element chunks) and one bn_aggr per 128-row tile."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    N, D = x.shape
    P = nl.tile_size.pmax
    FMAX = nl.tile_size.bn_stats_fmax
    g = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.reshape((1, D)).broadcast(0, P))
    nisa.dma_copy(dst=b, src=beta.reshape((1, D)).broadcast(0, P))
    n_chunks = (D + FMAX - 1) // FMAX
    for i in range(N // P):
        t = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * P:(i + 1) * P, :])
        stats = nl.ndarray((P, nl.tile_size.bn_stats_dim * n_chunks), dtype=nl.float32, buffer=nl.sbuf)
        for c in range(n_chunks):
            nisa.bn_stats(dst=stats[:, c * 6:(c + 1) * 6], data=t[:, c * FMAX:min(D, (c + 1) * FMAX)])
        mean_var = nl.ndarray((P, nl.tile_size.bn_aggr_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mean_var, data=stats)
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd, data=mean_var[:, 1:2], op0=nl.add, operand0=eps, op1=nl.power, operand1=-0.5)
        y = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=t, op0=nl.subtract, operand0=mean_var[:, 0:1], op1=nl.multiply, operand1=rstd)
        nisa.tensor_tensor(dst=y, data1=y, data2=g, op=nl.multiply)
        o = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o, data1=y, data2=b, op=nl.add)
        nisa.dma_copy(dst=out[i * P:(i + 1) * P, :], src=o)
    return out


def test_layernorm_bn_stats():
    x, g, b = torch.randn(256, 1100), torch.randn(1100), torch.randn(1100)
    out = layernorm(x.to(DEV), g.to(DEV), b.to(DEV), 1e-5)
    torch.testing.assert_close(out.cpu(), torch.nn.functional.layer_norm(x, (1100,), g, b, 1e-5),
                               rtol=1e-5, atol=1e-5)


@nki.jit
def softmax_rows(x):
    """Row softmax: VectorE max, one ScalarE exp that also sums (reduce registers), VectorE scale."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    R, F = x.shape
    for i in range(R // 128):
        t = nl.ndarray((128, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        neg_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True)
        e = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        o = nl.ndarray((128, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=e, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=o)
    return out


def test_softmax():
    x = torch.randn(256, 300) * 4
    torch.testing.assert_close(softmax_rows(x.to(DEV)).cpu(), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)


@nki.jit
def convenience_ops(x, w):
    """nl's returning operations (load, arithmetic with a [P, 1] broadcast, reductions, store)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nl.max(t, axis=1, keepdims=True)
    e = nl.exp(nl.subtract(t, m))
    s = nl.sum(e, axis=1, keepdims=True)
    y = nl.multiply(nl.divide(e, s), nl.load(w))
    nl.store(out, y)
    return out


def test_language_convenience_ops():
    x, w = torch.randn(64, 40), torch.randn(64, 40)
    ref = torch.softmax(x, -1) * w
    torch.testing.assert_close(convenience_ops(x.to(DEV), w.to(DEV)).cpu(), ref, rtol=1e-5, atol=1e-6)


# -- numerics ---------------------------------------------------------------------------------------------------

@nki.jit
def scale_shift(x, s, t):
    """(x * s) + t in one VectorE instruction: fp32 inside, one rounding to x's dtype."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=o, data=a, op0=nl.multiply, operand0=s, op1=nl.add, operand1=t)
    nisa.dma_copy(dst=out, src=o)
    return out


def test_engine_math_rounds_once_to_destination():
    x = torch.randn(128, 512).to(torch.bfloat16)
    s, t = 1.0 + 2.0 ** -9, 2.0 ** -12
    out = scale_shift(x.to(DEV), s, t).cpu()
    once = (x.float() * s + t).to(torch.bfloat16)
    twice = ((x * s).to(torch.bfloat16).float() + t).to(torch.bfloat16)
    assert torch.equal(out, once)
    assert not torch.equal(once, twice)  # the case discriminates one rounding from two


@nki.jit
def copy_as(x, dtype_name):
    out = nl.ndarray(x.shape, dtype=dtype_name, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=dtype_name, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)      # DMA converts through fp32
    nisa.dma_copy(dst=out, src=t)
    return out


def test_dma_conversion_round_to_nearest_even():
    one = 1.0
    half_ulp = 2.0 ** -8      # bf16 keeps 7 mantissa bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7
    x = torch.tensor([[one + half_ulp, one + 3 * half_ulp, -(one + half_ulp), 3.0e38]], dtype=torch.float32)
    out = copy_as(x.to(DEV), "bfloat16").cpu()
    assert out.tolist() == [[1.0, 1.0 + 2 * 2 ** -7, -1.0, x[0, 3].to(torch.bfloat16).item()]]


def test_float_to_int_rounds_to_even_and_saturates():
    x = torch.tensor([[2.5, 3.5, -2.5, 1e10, -1e10, 7.49]], dtype=torch.float32)
    out = copy_as(x.to(DEV), "int32").cpu()
    assert out.tolist() == [[2, 4, -2, 2 ** 31 - 1, -2 ** 31, 7]]


@nki.jit
def psum_accumulate(a, b):
    """sum_k a_k.T @ b_k over 4 K-tiles of bf16 inputs, accumulated in one fp32 PSUM tile."""
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
    for k in range(a.shape[0] // 128):
        ta = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, 256), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=tb, src=b[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=ta, moving=tb, accumulate=(k > 0))
    res = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_psum_accumulates_in_fp32():
    a = torch.randn(512, 128).to(torch.bfloat16)
    b = torch.randn(512, 256).to(torch.bfloat16)
    out = psum_accumulate(a.to(DEV), b.to(DEV)).cpu()
    ref = a.double().T @ b.double()                     # exact products of bf16 values
    assert out.dtype == torch.float32
    assert (out.double() - ref).abs().max() < 1e-3      # fp32 accumulation; a bf16 accumulator is off by ~0.1
    assert (out.double() - ref).abs().max() < ((a.T @ b).double() - ref).abs().max()


@nki.jit
def reads_unwritten(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:32], src=x[:, 0:32])   # only half of the tile is written
    nisa.dma_copy(dst=out, src=t)
    return out


def test_unwritten_memory_reads_nan():
    out = reads_unwritten(torch.ones(128, 64, device=DEV)).cpu()
    assert torch.equal(out[:, :32], torch.ones(128, 32))
    assert torch.isnan(out[:, 32:]).all()


def test_numpy_launch_matches_torch():
    a, b = np.random.rand(256, 1024).astype(np.float32), np.random.rand(256, 1024).astype(np.float32)
    out = nki.simulate(add_tiled)(a, b)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, a + b)


@bnki.jit
def add_into(x, y: nt.mutable_tensor):
    t = bnl.load(x)
    bnl.store(y, value=t + bnl.load(y))
    return y


def test_beta1_simulate_kernel_updates_mutable_in_place():
    x, y = np.ones((128, 8), np.float32), np.full((128, 8), 2.0, np.float32)
    out = bnki.simulate_kernel(add_into, x, y)
    np.testing.assert_array_equal(out, np.full((128, 8), 3.0))
    np.testing.assert_array_equal(y, out)


# -- GpSimd patterns ----------------------------------------------------------------------------------------

@nki.jit
def patterns(x):
    """iota: offset + p * channel_multiplier + w * step_w + x * step_x; affine_select keeps x where the pattern
    compares true against 0 (here: a causal mask, column <= row)."""
    out = nl.ndarray((2, 64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    it = nl.ndarray((64, 4, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=it, pattern=[[100, 4], [3, 8]], offset=7, channel_multiplier=1000)
    itf = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=itf, src=it.reshape((64, 32)))
    nisa.dma_copy(dst=out[0], src=itf)
    t = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    sel = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(dst=sel, pattern=[[-1, 32]], channel_multiplier=1, on_true_tile=t, on_false_value=-9.0,
                       cmp_op=nl.greater_equal)
    nisa.dma_copy(dst=out[1], src=sel)
    return out


def test_iota_and_affine_select_patterns():
    x = torch.randn(64, 32)
    out = patterns(x.to(DEV)).cpu()
    p = torch.arange(64).reshape(64, 1, 1)
    expect = 7 + p * 1000 + torch.arange(4).reshape(1, 4, 1) * 100 + torch.arange(8).reshape(1, 1, 8) * 3
    torch.testing.assert_close(out[0], expect.reshape(64, 32).float(), rtol=0, atol=0)
    keep = torch.arange(32).reshape(1, 32) <= torch.arange(64).reshape(64, 1)
    torch.testing.assert_close(out[1], torch.where(keep, x, torch.tensor(-9.0)), rtol=0, atol=0)


# -- indirect DMA (dma_copy's documented gather / scatter) ---------------------------------------------------

@nki.jit
def gather_rows(data, indices):
    P, F = indices.shape[0], data.shape[1]
    out = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((P, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    rows = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=data.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0))
    nisa.dma_copy(dst=out, src=rows)
    return out


@nki.jit
def scatter_rows(src_data, indices, output):
    P, F = src_data.shape
    src = nl.ndarray((P, F), dtype=src_data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=src_data)
    idx = nl.ndarray((P, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    nisa.dma_copy(dst=output.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0), src=src)
    return output


def test_indirect_dma_gather_and_scatter():
    data = torch.randn(300, 64)
    index = torch.randint(0, 300, (128, 1), dtype=torch.int32)
    got = gather_rows(data.to(DEV), index.to(DEV)).cpu()
    torch.testing.assert_close(got, data[index[:, 0].long()], rtol=0, atol=0)
    rows = torch.randperm(300)[:128].reshape(128, 1).to(torch.int32)
    src, out = torch.randn(128, 64), torch.zeros(300, 64, device=DEV)
    assert scatter_rows(src.to(DEV), rows.to(DEV), out) is out
    ref = torch.zeros(300, 64)
    ref[rows[:, 0].long()] = src
    torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)
    with pytest.raises(nki.NkiError, match="out-of-bound access"):
        gather_rows(data.to(DEV), torch.full((128, 1), 300, dtype=torch.int32, device=DEV))


@bnki.jit
def write_rows_at(src, dst: nt.mutable_tensor, row):
    """Beta 1: dst[row[0], :, :] = src, the row a tile of indices loaded from HBM (dynamic addressing)."""
    r = bnl.load(row)
    _, i_s, i_d = bnl.mgrid[:1, :src.shape[1], :src.shape[2]]
    bnisa.dma_copy(src=src, dst=dst[r, i_s, i_d], oob_mode=bnisa.oob_mode.skip)
    return dst


def test_beta1_tile_index_writes_the_row_it_names_and_skips_out_of_range():
    """A KV-cache write at a batch index held on the device (TorchNeuron's write_kv_cache_at_batch pattern),
    under torch.compile too: an index past the tensor is skipped with oob_mode.skip."""
    src, cache = torch.randn(1, 4, 8), torch.zeros(3, 4, 8, device=DEV)
    compiled = torch.compile(lambda s, c, r: write_rows_at(s, c, r), backend="neuron", fullgraph=True)
    with torch.no_grad():
        write_rows_at(src.to(DEV), cache, torch.tensor([2], dtype=torch.int32, device=DEV))
        compiled(src.to(DEV) * 2, cache, torch.tensor([0], dtype=torch.int32, device=DEV))
        compiled(src.to(DEV) * 3, cache, torch.tensor([3], dtype=torch.int32, device=DEV))
    ref = torch.zeros(3, 4, 8)
    ref[2], ref[0] = src[0], src[0] * 2
    torch.testing.assert_close(cache.cpu(), ref, rtol=0, atol=0)
