"""vLLM's CPU build, made fit for TRL's colocate weight sync.

vLLM 0.32's CPU build packs each linear layer's weight for oneDNN (or its other CPU kernels) once loaded and puts an
empty parameter in its place (``dispatch_cpu_unquantized_gemm(layer, remove_weight=True)``), on CPUs whose
instructions those kernels take (AVX-512 BF16 and AMX machines; elsewhere it falls back to torch's linear and keeps
the weight). TRL's colocate mode syncs the trained weights by loading each one into the engine again
(``model.load_weights``), which then finds a parameter with no ``weight_loader`` and stops the run. A training
program that generates with vLLM colocated on CPU keeps vLLM's plain-linear path, whose weights stay loadable: the
samples are the same model's; only the kernel differs. Generation alone (evaluation, rejection sampling) loads no
weights again and keeps vLLM's fast kernels.
"""

from __future__ import annotations


def keep_weights_reloadable() -> bool:
    """On vLLM's CPU platform, linear layers keep their weights (torch's linear) so TRL can load new ones; True
    when it applied (a CPU platform), False elsewhere (a GPU's layers keep their weights anyway)."""
    import torch
    from vllm.model_executor.layers import utils
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return False

    def dispatch(layer: torch.nn.Module, remove_weight: bool) -> None:  # noqa: ARG001 - the weight stays
        layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, weight, bias)

    utils.dispatch_cpu_unquantized_gemm = dispatch
    return True
