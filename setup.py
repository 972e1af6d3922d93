# Builds the C++ core (torch_neuronx._C) against the installed torch.
import glob
import os

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # importing torch here must not load a plugin

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

sources = sorted(glob.glob("csrc/*.cpp") + glob.glob("csrc/**/*.cpp", recursive=True))
sources = sorted(set(sources))

setup(
    ext_modules=[
        CppExtension(
            "torch_neuronx._C",
            sources,
            # Kineto's headers (shipped in torch's include/kineto): csrc/core/Profiler.cpp registers a PrivateUse1
            # activity profiler with it
            include_dirs=[os.path.abspath("csrc"), os.path.join(os.path.dirname(torch.__file__), "include", "kineto")],
            extra_compile_args=["-O2", "-g0", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
