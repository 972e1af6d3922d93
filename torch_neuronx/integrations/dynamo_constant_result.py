"""Marking a function torch._dynamo.assume_constant_result without importing Dynamo at `import torch`.

The need. An NKI kernel launch must be one node of a torch.compile graph, so the function that computes its
launch plan (torch_neuronx/nki/torch_glue.py: a dry run giving shapes and written parameters) is marked
torch._dynamo.assume_constant_result. Calling that decorator imports torch._dynamo (~1.3 s: most of what
`import torch` would then cost), and torch_neuronx loads with every `import torch`.

The shim. In torch 2.13 the decorator only sets `fn._dynamo_marked_constant = True`
(torch/_dynamo/decorators.py), which Dynamo reads when it traces a call of fn; the shim sets that attribute.
Under another torch release it calls the real decorator (importing Dynamo). tests/test_nki_torch.py checks
that the decorator still does exactly this.

Upstream fix that removes it: a public marker that does not import Dynamo (torch.compiler's
assume_constant_result setting the attribute itself).
"""

from __future__ import annotations

import torch

TORCH = "2.13."


def assume_constant_result(fn):
    if not torch.__version__.startswith(TORCH):
        from torch._dynamo import assume_constant_result as real
        return real(fn)
    fn._dynamo_marked_constant = True
    return fn
