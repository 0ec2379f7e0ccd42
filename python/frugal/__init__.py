"""frugal: communication-efficient data-parallel deep learning on MPI.

``import frugal.torch as hvd`` gives PyTorch scripts a Horovod-compatible API whose gradient
exchange is frugal's engine and strategies (docs/python.md).
"""

import ctypes as _ctypes

# Open MPI loads its components as plugins that need libmpi's symbols to be global; a Python
# extension is loaded with local symbols, so libmpi is made global first (as mpi4py does).
for _name in ("libmpi.so.40", "libmpi.so"):
    try:
        _ctypes.CDLL(_name, mode=_ctypes.RTLD_GLOBAL)
        break
    except OSError:
        pass

__version__ = "0.1.0"
