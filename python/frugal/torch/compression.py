"""Gradient compression as Horovod names it: ``Compression.none`` and ``Compression.fp16``.

For a DistributedOptimizer, ``Compression.fp16`` is frugal's fp16 compressor (the same as
``compress="fp16"``). Given to ``allreduce``, a compressor converts the tensor before the
reduction and back after it, as Horovod's do.
"""

import torch


class Compressor:
    """Converts a tensor for the wire and back."""

    spec = ""  # frugal's compressor spec for a DistributedOptimizer ("" = dense)

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class NoneCompressor(Compressor):
    """Sends tensors as they are."""


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16."""

    spec = "fp16"

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.type(ctx)


class Compression:
    """The compressors, by name."""

    none = NoneCompressor
    fp16 = FP16Compressor
