"""Whether PyTorch's own oneDNN ("onednn" quantized engine) multiplies u8 x s8 exactly.

With AVX-512 VNNI (vpdpbusd) oneDNN's int8 products are exact. Without it (an AVX2-only
EPYC, or a run capped with ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA) it adds two u8 x s8
products in int16 with saturation (vpmaddubsw), so PyTorch's onednn engine itself leaves
its reference model wherever activations above 127 meet large weights; PyTorch asks for
reduce_range on such CPUs. Tests that hold something to PyTorch's onednn engine use this
to restrict, or skip, that comparison on such machines (their output says so).
AVX-VNNI alone (ymm) counts as no VNNI here: this conservative answer can only skip a
comparison, never hold one to a saturating engine.
"""
import os

# oneDNN ISA caps that keep AVX-512 VNNI (the hierarchy above avx512_core_vnni).
_VNNI_CAPS = ("AVX512_CORE_VNNI", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "ALL")


def onednn_has_vnni():
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    if cap and cap.strip().upper() not in _VNNI_CAPS:
        return False
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512_vnni" in f.read().split()
    except OSError:
        return False
