"""senti's C training kernels built ahead of time, where a C compiler is there at install (optional: without one
the install goes on, and senti compiles them on first use or trains with its Python kernels). The package itself is
described in pyproject.toml."""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_spec = importlib.util.spec_from_file_location("senti_kernels_build", Path(__file__).parent / "senti/kernels/build.py")
kernels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kernels)


class BuildKernels(build_ext):
    """build.py's rule (the one native.py uses on first use), not setuptools' compiler flags."""

    def build_extension(self, ext):
        output = Path(self.get_ext_fullpath(ext.name))
        output.parent.mkdir(parents=True, exist_ok=True)
        output.unlink(missing_ok=True)  # an earlier build's, in a reused build folder
        try:
            kernels.compile_library(output)
        except (RuntimeError, OSError) as error:
            print(f"senti: the C kernels were not built at install ({error}); they are built on first use instead")


setup(ext_modules=[Extension("senti.kernels._senti_kernels", [str(kernels.SOURCE.relative_to(Path(__file__).parent))],
                             optional=True)],
      cmdclass={"build_ext": BuildKernels})
