# Builds the C++ core (torch_neuronx._C) against the installed torch.
# TORCHNEURON_SANITIZE=1 builds it with AddressSanitizer + UndefinedBehaviorSanitizer instead, into its own
# build directory (build/sanitize) so its objects never mix with the normal build's; scripts/sanitize.sh
# builds and runs the tests under it (docs/testing.md).
import glob
import os

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # importing torch here must not load a plugin

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

sources = sorted(glob.glob("csrc/*.cpp") + glob.glob("csrc/**/*.cpp", recursive=True))
sources = sorted(set(sources))

SANITIZE = os.environ.get("TORCHNEURON_SANITIZE", "0") not in ("", "0")
if SANITIZE:
    # -O1 keeps the build and the run reasonably fast; frame pointers and line tables give readable reports.
    # Any UB report aborts (no recovery), so a run with a report cannot pass.
    sanitize = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
    compile_args = ["-O1", "-g1", "-Wno-unused-parameter"] + sanitize
    link_args = sanitize
    options = {"build": {"build_base": os.path.join("build", "sanitize")}}
else:
    compile_args, link_args, options = ["-O2", "-g0", "-Wno-unused-parameter"], [], {}

# scripts/setup.sh installs the checkout editable with this set, then builds the extension in place with
# scripts/build.sh (ninja, objects in ./build): pip would otherwise compile it once more in a temporary
# directory of its own, so the next build.sh in ./build would start from nothing (minutes). Any other
# install (a wheel, `pip install .`) builds the extension here as usual.
IN_PLACE_BUILD = os.environ.get("TORCHNEURON_EXTENSION_BUILT_IN_PLACE", "0") == "1"

# `import nki` / `import neuronxcc.nki` before torch: a .pth in site-packages installs the NKI alias finder at
# interpreter start (torch_neuronx/nki/importer.py says exactly what it does; it defers to AWS's packages).
import sysconfig  # noqa: E402

_SITE = os.path.relpath(sysconfig.get_paths()["purelib"], sysconfig.get_paths()["data"])

setup(
    data_files=[(_SITE, ["torch_neuronx/nki/torch_neuronx_nki.pth"])],
    ext_modules=[] if IN_PLACE_BUILD else [
        CppExtension(
            "torch_neuronx._C",
            sources,
            # Kineto's headers (shipped in torch's include/kineto): csrc/core/Profiler.cpp registers a PrivateUse1
            # activity profiler with it
            include_dirs=[os.path.abspath("csrc"), os.path.join(os.path.dirname(torch.__file__), "include", "kineto")],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    options=options,
)
