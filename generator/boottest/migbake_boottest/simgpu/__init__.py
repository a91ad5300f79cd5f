"""The simulated GPU (test-only): a fake ``libnvidia-ml.so.1`` and ``nvidia-smi`` in C (``*.c``, README.md) that
NVIDIA's real nvidia-mig-parted runs over; ``build`` compiles them, ``node`` describes the simulated node
(its simgpu.conf from the catalog), ``guest`` installs it into a guest image.

May import this package's own errors/hostrun and migbake's library.
"""
