// Unsupported layouts on neuron (UnsupportedLayouts.h). Two ways in: a host
// kernel returns a non-strided result (x.to_sparse() on a dense neuron tensor),
// caught by the fallback; or an op reaches a neuron dispatch key of a sparse,
// quantized or nested layout, caught by the fallbacks registered here.
#include "aten/native/UnsupportedLayouts.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>


namespace neuron {

namespace {
// The names torch prints (torch.sparse_coo, torch.sparse_csr, ...).
const char* layout_name(c10::Layout layout) {
  switch (layout) {
    case c10::kSparse: return "sparse_coo";
    case c10::kSparseCsr: return "sparse_csr";
    case c10::kSparseCsc: return "sparse_csc";
    case c10::kSparseBsr: return "sparse_bsr";
    case c10::kSparseBsc: return "sparse_bsc";
    case c10::kMkldnn: return "mkldnn";
    case c10::Layout::Jagged: return "jagged";
    default: return "non-strided";
  }
}

// The one wording: the layout, the op, and the fix.
[[noreturn]] void reject(const std::string& op, const char* layout) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "The ", layout, " layout is not supported on neuron (", op,
                              "): Neuron supports dense (strided) tensors only. Keep the tensor dense on "
                              "neuron (to_dense(), or do not convert it), or run the ", layout,
                              " computation on the CPU (tensor.cpu()) and move the dense result back.");
}
} // namespace

void reject_layout(const std::string& op, c10::Layout layout) { reject(op, layout_name(layout)); }

namespace {

void reject_key(const char* layout, const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack*) {
  std::string name = op.schema().name();
  if (!op.schema().overload_name().empty()) name += "." + op.schema().overload_name();
  reject(name, layout);
}

void sparse(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* s) { reject_key("sparse", op, ks, s); }
void sparse_csr(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* s) {
  reject_key("sparse compressed (CSR/CSC/BSR/BSC)", op, ks, s);
}
void quantized(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* s) {
  reject_key("quantized", op, ks, s);
}
void nested(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* s) {
  reject_key("nested (jagged/strided NestedTensor)", op, ks, s);
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse>()); }
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_csr>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&quantized>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested>());
}

} // namespace
} // namespace neuron
