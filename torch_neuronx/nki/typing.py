"""nki.typing / neuronxcc.nki.typing: parameter annotations.

`x: nt.mutable_tensor` marks a beta-1 kernel parameter the kernel may write (it must also return it:
err_mutable_parameter_not_returned); without it, writing a parameter raises
err_cannot_update_immutable_parameter. `nt.tensor[128, 512]` annotates a shape (not checked here).
"""

from __future__ import annotations


class _MutableTensor:
    """The annotation of a writable (in-place) kernel parameter."""

    def __repr__(self) -> str:
        return "nt.mutable_tensor"

    def __getitem__(self, item):
        return self


mutable_tensor = _MutableTensor()


class _TensorAnnotation:
    def __getitem__(self, item):
        return self

    def __call__(self, *args, **kwargs):
        return self


tensor = _TensorAnnotation()
scalar = _TensorAnnotation()


def is_mutable_annotation(annotation) -> bool:
    if annotation is mutable_tensor or isinstance(annotation, _MutableTensor):
        return True
    # `from __future__ import annotations` kernels: the annotation is its source text
    return isinstance(annotation, str) and annotation.replace(" ", "").endswith("mutable_tensor")
