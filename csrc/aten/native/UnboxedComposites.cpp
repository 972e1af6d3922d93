// Unboxed recording kernels for the composite ops TorchNeuron registers as one Neuron kernel
// (track_registered_composites, OpTracking.h). A boxed kernel in front of each of them (argument stack,
// IValue boxing on the way in and again into the composite) cost the per-op case of bench/eager.py about 2%
// of its step (docs/runtime.md); these record the op and call its composite kernel as a C++ function.
//
// One kernel per overload, generated from the op's ATen signature (at::_ops::<op>::schema) and the composite
// kernel's public entry (at::<alias key namespace>::<op>): the compiler checks that the two match. The list
// covers every composite overload in torch_neuronx/registered_ops.py on this torch;
// tests/test_op_tracking.py checks that each one is installed unboxed. An overload missing here (another
// torch) takes the boxed recording kernel in OpTracking.cpp: the same recording, slower.
#include "aten/native/CompositeRecording.h"

#include <ATen/ops/_foreach_add_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/_foreach_add_ops.h>
#include <ATen/ops/_foreach_div_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/_foreach_div_ops.h>
#include <ATen/ops/_foreach_mul_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/_foreach_mul_ops.h>
#include <ATen/ops/_foreach_norm_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/_foreach_norm_ops.h>
#include <ATen/ops/_foreach_sub_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/_foreach_sub_ops.h>
#include <ATen/ops/_fused_rms_norm_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/_fused_rms_norm_ops.h>
#include <ATen/ops/_grouped_mm_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/_grouped_mm_ops.h>
#include <ATen/ops/_native_multi_head_attention_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/_native_multi_head_attention_ops.h>
#include <ATen/ops/_to_copy_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/_to_copy_ops.h>
#include <ATen/ops/abs_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/arange_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/argsort_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/argsort_ops.h>
#include <ATen/ops/atleast_2d_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/atleast_2d_ops.h>
#include <ATen/ops/batch_norm_backward_elemt_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/batch_norm_backward_elemt_ops.h>
#include <ATen/ops/batch_norm_backward_reduce_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/batch_norm_backward_reduce_ops.h>
#include <ATen/ops/batch_norm_stats_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/batch_norm_stats_ops.h>
#include <ATen/ops/bitwise_left_shift_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/bitwise_left_shift_ops.h>
#include <ATen/ops/bitwise_right_shift_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/bitwise_right_shift_ops.h>
#include <ATen/ops/clone_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/clone_ops.h>
#include <ATen/ops/constant_pad_nd_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/constant_pad_nd_ops.h>
#include <ATen/ops/contiguous_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/contiguous_ops.h>
#include <ATen/ops/convolution_backward_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/convolution_backward_ops.h>
#include <ATen/ops/convolution_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/convolution_ops.h>
#include <ATen/ops/dot_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/dot_ops.h>
#include <ATen/ops/embedding_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/embedding_dense_backward_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/embedding_ops.h>
#include <ATen/ops/eye_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/eye_ops.h>
#include <ATen/ops/flip_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/flip_ops.h>
#include <ATen/ops/full_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/full_ops.h>
#include <ATen/ops/index_select_backward_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/index_select_backward_ops.h>
#include <ATen/ops/isfinite_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/isfinite_ops.h>
#include <ATen/ops/isinf_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/isinf_ops.h>
#include <ATen/ops/linear_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/linear_ops.h>
#include <ATen/ops/logical_and_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/logical_and_ops.h>
#include <ATen/ops/logical_not_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/logical_not_ops.h>
#include <ATen/ops/logical_or_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/logical_or_ops.h>
#include <ATen/ops/logical_xor_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/logical_xor_ops.h>
#include <ATen/ops/mean_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mul_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/mv_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/mv_ops.h>
#include <ATen/ops/native_layer_norm_backward_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/new_empty_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/new_empty_ops.h>
#include <ATen/ops/one_hot_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/one_hot_ops.h>
#include <ATen/ops/ones_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/ones_like_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/ones_like_ops.h>
#include <ATen/ops/ones_ops.h>
#include <ATen/ops/relu_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/repeat_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/repeat_ops.h>
#include <ATen/ops/scalar_tensor_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/scalar_tensor_ops.h>
#include <ATen/ops/select_backward_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/select_backward_ops.h>
#include <ATen/ops/slice_backward_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/slice_backward_ops.h>
#include <ATen/ops/stack_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/stack_ops.h>
#include <ATen/ops/sub_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/value_selecting_reduction_backward_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/value_selecting_reduction_backward_ops.h>
#include <ATen/ops/vstack_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/vstack_ops.h>
#include <ATen/ops/zeros_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/zeros_ops.h>

#include <unordered_map>

namespace neuron::op_tracking {
namespace {

template <class Op, class Signature = typename Op::schema>
struct UnboxedRecorder;
template <class Op, class R, class... Args>
struct UnboxedRecorder<Op, R(Args...)> {
  static inline Composite* state = nullptr;  // set by track_registered_composites before the kernel is installed

  // As the boxed kernel: calls on fake or functional tensors (tracing: the Python key is set) run the
  // composite without recording; the composite's parts are recorded only for ops that record theirs.
  template <R (*composite)(Args...)>
  static R call(c10::DispatchKeySet keys, Args... args) {
    Composite& c = *state;
    if (!keys.has(c10::DispatchKey::Python)) record(c.site);
    if (c.records_parts) return composite(std::forward<Args>(args)...);
    InsideRegisteredOp inside;
    return composite(std::forward<Args>(args)...);
  }
};

std::string overload_name(const char* name, const char* overload) {
  return overload[0] ? std::string(name) + "." + overload : std::string(name);
}

constexpr c10::DispatchKey compositeexplicitautogradnonfunctional = c10::DispatchKey::CompositeExplicitAutogradNonFunctional;
constexpr c10::DispatchKey compositeexplicitautograd = c10::DispatchKey::CompositeExplicitAutograd;
constexpr c10::DispatchKey compositeimplicitautograd = c10::DispatchKey::CompositeImplicitAutograd;

// (at::_ops struct, alias key namespace, composite kernel function in it)
#define NEURON_UNBOXED_COMPOSITE(op, ns, fn)                                                                   \
  {overload_name(at::_ops::op::name, at::_ops::op::overload_name),                                          \
   UnboxedComposite{ns, &UnboxedRecorder<at::_ops::op>::state, [] {                                          \
                      return torch::CppFunction(TORCH_FN((UnboxedRecorder<at::_ops::op>::call<               \
                                                          static_cast<at::_ops::op::schema*>(&at::ns::fn)>))); \
                    }}},

const std::unordered_map<std::string, UnboxedComposite>& unboxed_composites() {
  static const auto* table = new std::unordered_map<std::string, UnboxedComposite>{
  NEURON_UNBOXED_COMPOSITE(_foreach_add_List, compositeexplicitautograd, _foreach_add)
  NEURON_UNBOXED_COMPOSITE(_foreach_add_List_out, compositeexplicitautograd, _foreach_add_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_add_Scalar, compositeexplicitautograd, _foreach_add)
  NEURON_UNBOXED_COMPOSITE(_foreach_add_ScalarList, compositeexplicitautograd, _foreach_add)
  NEURON_UNBOXED_COMPOSITE(_foreach_add_ScalarList_out, compositeexplicitautograd, _foreach_add_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_add_Scalar_out, compositeexplicitautograd, _foreach_add_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_add_Tensor, compositeexplicitautograd, _foreach_add)
  NEURON_UNBOXED_COMPOSITE(_foreach_add_Tensor_out, compositeexplicitautograd, _foreach_add_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_add__List, compositeexplicitautograd, _foreach_add_)
  NEURON_UNBOXED_COMPOSITE(_foreach_add__Scalar, compositeexplicitautograd, _foreach_add_)
  NEURON_UNBOXED_COMPOSITE(_foreach_add__ScalarList, compositeexplicitautograd, _foreach_add_)
  NEURON_UNBOXED_COMPOSITE(_foreach_add__Tensor, compositeexplicitautograd, _foreach_add_)
  NEURON_UNBOXED_COMPOSITE(_foreach_div_List, compositeexplicitautograd, _foreach_div)
  NEURON_UNBOXED_COMPOSITE(_foreach_div_List_out, compositeexplicitautograd, _foreach_div_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_div_Scalar, compositeexplicitautograd, _foreach_div)
  NEURON_UNBOXED_COMPOSITE(_foreach_div_ScalarList, compositeexplicitautograd, _foreach_div)
  NEURON_UNBOXED_COMPOSITE(_foreach_div_ScalarList_out, compositeexplicitautograd, _foreach_div_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_div_Scalar_out, compositeexplicitautograd, _foreach_div_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_div_Tensor, compositeexplicitautograd, _foreach_div)
  NEURON_UNBOXED_COMPOSITE(_foreach_div_Tensor_out, compositeexplicitautograd, _foreach_div_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_div__List, compositeexplicitautograd, _foreach_div_)
  NEURON_UNBOXED_COMPOSITE(_foreach_div__Scalar, compositeexplicitautograd, _foreach_div_)
  NEURON_UNBOXED_COMPOSITE(_foreach_div__ScalarList, compositeexplicitautograd, _foreach_div_)
  NEURON_UNBOXED_COMPOSITE(_foreach_div__Tensor, compositeexplicitautograd, _foreach_div_)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul_List, compositeexplicitautograd, _foreach_mul)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul_List_out, compositeexplicitautograd, _foreach_mul_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul_Scalar, compositeexplicitautograd, _foreach_mul)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul_ScalarList, compositeexplicitautograd, _foreach_mul)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul_ScalarList_out, compositeexplicitautograd, _foreach_mul_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul_Scalar_out, compositeexplicitautograd, _foreach_mul_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul_Tensor, compositeexplicitautograd, _foreach_mul)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul_Tensor_out, compositeexplicitautograd, _foreach_mul_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul__List, compositeexplicitautograd, _foreach_mul_)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul__Scalar, compositeexplicitautograd, _foreach_mul_)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul__ScalarList, compositeexplicitautograd, _foreach_mul_)
  NEURON_UNBOXED_COMPOSITE(_foreach_mul__Tensor, compositeexplicitautograd, _foreach_mul_)
  NEURON_UNBOXED_COMPOSITE(_foreach_norm_Scalar, compositeexplicitautograd, _foreach_norm)
  NEURON_UNBOXED_COMPOSITE(_foreach_norm_Scalar_out, compositeexplicitautograd, _foreach_norm_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_sub_List, compositeexplicitautograd, _foreach_sub)
  NEURON_UNBOXED_COMPOSITE(_foreach_sub_List_out, compositeexplicitautograd, _foreach_sub_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_sub_Scalar, compositeexplicitautograd, _foreach_sub)
  NEURON_UNBOXED_COMPOSITE(_foreach_sub_ScalarList, compositeexplicitautograd, _foreach_sub)
  NEURON_UNBOXED_COMPOSITE(_foreach_sub_ScalarList_out, compositeexplicitautograd, _foreach_sub_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_sub_Scalar_out, compositeexplicitautograd, _foreach_sub_outf)
  NEURON_UNBOXED_COMPOSITE(_foreach_sub__List, compositeexplicitautograd, _foreach_sub_)
  NEURON_UNBOXED_COMPOSITE(_foreach_sub__Scalar, compositeexplicitautograd, _foreach_sub_)
  NEURON_UNBOXED_COMPOSITE(_foreach_sub__ScalarList, compositeexplicitautograd, _foreach_sub_)
  NEURON_UNBOXED_COMPOSITE(_fused_rms_norm, compositeimplicitautograd, _fused_rms_norm)
  NEURON_UNBOXED_COMPOSITE(_grouped_mm, compositeexplicitautograd, _grouped_mm)
  NEURON_UNBOXED_COMPOSITE(_native_multi_head_attention_out, compositeexplicitautograd, _native_multi_head_attention_outf)
  NEURON_UNBOXED_COMPOSITE(_to_copy, compositeexplicitautograd, _to_copy)
  NEURON_UNBOXED_COMPOSITE(abs, compositeexplicitautograd, abs)
  NEURON_UNBOXED_COMPOSITE(arange, compositeexplicitautograd, arange)
  NEURON_UNBOXED_COMPOSITE(argsort_stable, compositeimplicitautograd, argsort)
  NEURON_UNBOXED_COMPOSITE(atleast_2d_Sequence, compositeimplicitautograd, atleast_2d)
  NEURON_UNBOXED_COMPOSITE(batch_norm_backward_elemt_out, compositeexplicitautograd, batch_norm_backward_elemt_outf)
  NEURON_UNBOXED_COMPOSITE(batch_norm_backward_reduce_out, compositeexplicitautograd, batch_norm_backward_reduce_outf)
  NEURON_UNBOXED_COMPOSITE(batch_norm_stats_out, compositeexplicitautograd, batch_norm_stats_outf)
  NEURON_UNBOXED_COMPOSITE(bitwise_left_shift_Scalar_Tensor, compositeexplicitautograd, bitwise_left_shift)
  NEURON_UNBOXED_COMPOSITE(bitwise_left_shift_Scalar_Tensor_out, compositeexplicitautograd, bitwise_left_shift_outf)
  NEURON_UNBOXED_COMPOSITE(bitwise_left_shift_Tensor_Scalar, compositeexplicitautograd, bitwise_left_shift)
  NEURON_UNBOXED_COMPOSITE(bitwise_left_shift_Tensor_Scalar_out, compositeexplicitautograd, bitwise_left_shift_outf)
  NEURON_UNBOXED_COMPOSITE(bitwise_right_shift_Scalar_Tensor, compositeexplicitautograd, bitwise_right_shift)
  NEURON_UNBOXED_COMPOSITE(bitwise_right_shift_Scalar_Tensor_out, compositeexplicitautograd, bitwise_right_shift_outf)
  NEURON_UNBOXED_COMPOSITE(bitwise_right_shift_Tensor_Scalar, compositeexplicitautograd, bitwise_right_shift)
  NEURON_UNBOXED_COMPOSITE(bitwise_right_shift_Tensor_Scalar_out, compositeexplicitautograd, bitwise_right_shift_outf)
  NEURON_UNBOXED_COMPOSITE(clone, compositeexplicitautograd, clone)
  NEURON_UNBOXED_COMPOSITE(constant_pad_nd, compositeexplicitautograd, constant_pad_nd_symint)
  NEURON_UNBOXED_COMPOSITE(contiguous, compositeimplicitautograd, contiguous)
  NEURON_UNBOXED_COMPOSITE(convolution, compositeexplicitautograd, convolution_symint)
  NEURON_UNBOXED_COMPOSITE(convolution_backward, compositeexplicitautograd, convolution_backward_symint)
  NEURON_UNBOXED_COMPOSITE(dot_out, compositeexplicitautograd, dot_outf)
  NEURON_UNBOXED_COMPOSITE(embedding, compositeexplicitautograd, embedding_symint)
  NEURON_UNBOXED_COMPOSITE(embedding_dense_backward_out, compositeexplicitautograd, embedding_dense_backward_symint_outf)
  NEURON_UNBOXED_COMPOSITE(eye, compositeexplicitautograd, eye_symint)
  NEURON_UNBOXED_COMPOSITE(eye_m, compositeexplicitautograd, eye_symint)
  NEURON_UNBOXED_COMPOSITE(flip_out, compositeexplicitautograd, flip_outf)
  NEURON_UNBOXED_COMPOSITE(full, compositeexplicitautograd, full_symint)
  NEURON_UNBOXED_COMPOSITE(full_out, compositeexplicitautograd, full_symint_outf)
  NEURON_UNBOXED_COMPOSITE(index_select_backward, compositeimplicitautograd, index_select_backward_symint)
  NEURON_UNBOXED_COMPOSITE(isfinite, compositeimplicitautograd, isfinite)
  NEURON_UNBOXED_COMPOSITE(isinf, compositeexplicitautograd, isinf)
  NEURON_UNBOXED_COMPOSITE(linear, compositeimplicitautograd, linear)
  NEURON_UNBOXED_COMPOSITE(logical_and, compositeexplicitautograd, logical_and)
  NEURON_UNBOXED_COMPOSITE(logical_not, compositeexplicitautograd, logical_not)
  NEURON_UNBOXED_COMPOSITE(logical_or, compositeexplicitautograd, logical_or)
  NEURON_UNBOXED_COMPOSITE(logical_xor, compositeexplicitautograd, logical_xor)
  NEURON_UNBOXED_COMPOSITE(mean, compositeexplicitautograd, mean)
  NEURON_UNBOXED_COMPOSITE(mean_dtype_out, compositeexplicitautograd, mean_outf)
  NEURON_UNBOXED_COMPOSITE(mul_Scalar, compositeexplicitautograd, mul)
  NEURON_UNBOXED_COMPOSITE(mul_Scalar_out, compositeexplicitautograd, mul_outf)
  NEURON_UNBOXED_COMPOSITE(mv, compositeexplicitautograd, mv)
  NEURON_UNBOXED_COMPOSITE(mv_out, compositeexplicitautograd, mv_outf)
  NEURON_UNBOXED_COMPOSITE(native_layer_norm_out, compositeexplicitautograd, native_layer_norm_symint_outf)
  NEURON_UNBOXED_COMPOSITE(native_layer_norm_backward_out, compositeexplicitautograd, native_layer_norm_backward_symint_outf)
  NEURON_UNBOXED_COMPOSITE(new_empty, compositeexplicitautograd, new_empty_symint)
  NEURON_UNBOXED_COMPOSITE(one_hot, compositeimplicitautograd, one_hot)
  NEURON_UNBOXED_COMPOSITE(ones, compositeexplicitautograd, ones_symint)
  NEURON_UNBOXED_COMPOSITE(ones_out, compositeexplicitautograd, ones_symint_outf)
  NEURON_UNBOXED_COMPOSITE(ones_like, compositeexplicitautograd, ones_like)
  NEURON_UNBOXED_COMPOSITE(relu_out, compositeexplicitautograd, relu_outf)
  NEURON_UNBOXED_COMPOSITE(repeat, compositeexplicitautograd, repeat_symint)
  NEURON_UNBOXED_COMPOSITE(scalar_tensor, compositeexplicitautograd, scalar_tensor)
  NEURON_UNBOXED_COMPOSITE(select_backward, compositeexplicitautogradnonfunctional, select_backward_symint)
  NEURON_UNBOXED_COMPOSITE(slice_backward, compositeexplicitautograd, slice_backward_symint)
  NEURON_UNBOXED_COMPOSITE(stack, compositeexplicitautograd, stack)
  NEURON_UNBOXED_COMPOSITE(stack_out, compositeexplicitautograd, stack_outf)
  NEURON_UNBOXED_COMPOSITE(sub_Scalar, compositeexplicitautograd, sub)
  NEURON_UNBOXED_COMPOSITE(sub_Scalar_out, compositeexplicitautograd, sub_outf)
  NEURON_UNBOXED_COMPOSITE(sum, compositeexplicitautograd, sum)
  NEURON_UNBOXED_COMPOSITE(value_selecting_reduction_backward, compositeimplicitautograd, value_selecting_reduction_backward_symint)
  NEURON_UNBOXED_COMPOSITE(vstack, compositeimplicitautograd, vstack)
  NEURON_UNBOXED_COMPOSITE(vstack_out, compositeimplicitautograd, vstack_outf)
  NEURON_UNBOXED_COMPOSITE(zeros, compositeexplicitautograd, zeros_symint)
  NEURON_UNBOXED_COMPOSITE(zeros_out, compositeexplicitautograd, zeros_symint_outf)
  };
  return *table;
}

#undef NEURON_UNBOXED_COMPOSITE

} // namespace

const UnboxedComposite* find_unboxed_composite(const std::string& overload) {
  auto it = unboxed_composites().find(overload);
  return it == unboxed_composites().end() ? nullptr : &it->second;
}

} // namespace neuron::op_tracking
