r"""Cost of σN-Ens against every peer, measured in one process: time, throughput, memory, size.

For one backbone and M members this measures, per method, the training step (forward,
backward and SGD step), evaluation throughput, peak memory of a training step, parameters
and multiply-adds per image (all members). Methods are timed interleaved (round-robin, the
order rotated every repeat) after a warm-up, and medians are reported, so that a busy
machine slows every method alike and the ratios stay meaningful. It also times a σNorm
layer's forward+backward against torch's plain layer on the same ``(M·B, ...)`` tensor,
the σN-Ens predict path (mean probabilities and modulation uncertainty), and σN-Ens
evaluation in one backbone pass over all B·M rows (its default, ``eval_chunk_size="auto"``,
evaluates on CPU in parts).

Reproduce (the CPU table of ``BENCHMARKS.md``; the GPU presets use CUDA mixed precision)::

    python benchmarks/throughput.py --preset cpu-resnet18
    python benchmarks/throughput.py --preset gpu-wrn28-10      # batch 128, 16-mixed
    python benchmarks/throughput.py --preset gpu-vit-b16       # batch 64, bf16-mixed
    python benchmarks/throughput.py --preset cpu-resnet18 --reduced   # seconds, for CI
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import os
import platform
import statistics
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode
from torch.utils.weak import WeakIdKeyDictionary

from torch_uncertainty_signorm import predict, signorm_ensemble
from torch_uncertainty_signorm.signorm.layers import SigmaBatchNorm2d, SigmaLayerNorm
from torch_uncertainty_signorm.signorm.optim import signorm_param_groups

SINGLE, DEEP, PACKED, BATCHED = (
    "Single model",
    "Deep Ensembles",
    "Packed-Ensembles",
    "BatchEnsemble",
)
FILM, LORA = "FiLM-Ensemble", "LoRA-Ensemble"
SIGNORM, SIGNORM_AT_INPUT = "σN-Ens", "σN-Ens (expand at input)"
PREDICT_ROW = "σN-Ens predict (p̄, U_mod)"
ONE_PASS_ROW = "σN-Ens, eval in one pass"
#: Target bounds of the issues, as ratios from this benchmark.
MAX_STEP_VS_DEEP, MAX_STEP_VS_M_SINGLE, MAX_PARAMS_VS_SINGLE, MIN_EVAL_VS_DEEP = (
    1.0,
    1.1,
    1.03,
    1.0,
)
#: σNorm layer / plain layer, forward+backward on the same tensor.
MAX_NORM_OVERHEAD = {"σBN2d": 1.10, "σLN": 1.50}
#: aten ops counted as one normalization kernel (torch's CPU ``rms_norm`` is a composite
#: whose one ``rsqrt`` stands for it).
_NORM_OPS = ("batch_norm", "layer_norm", "group_norm", "rms_norm")


@dataclass(frozen=True)
class Preset:
    """One benchmark configuration: backbone, input, batch, device and precision.

    ``bn_shape``/``ln_shape`` are the per-image shapes of the isolated norm comparison:
    the first stage's feature map for BatchNorm2d, a token sequence for LayerNorm.
    """

    backbone: str
    image_size: int
    batch_size: int
    device: str
    precision: str
    num_classes: int = 100
    bn_shape: tuple[int, ...] = (64, 32, 32)
    ln_shape: tuple[int, ...] = (64, 256)


PRESETS = {
    "cpu-resnet18": Preset("resnet18", 32, 32, "cpu", "32-true"),
    "gpu-wrn28-10": Preset(
        "wrn28-10", 32, 128, "cuda", "16-mixed", bn_shape=(160, 32, 32), ln_shape=(197, 768)
    ),
    "gpu-vit-b16": Preset(
        "vit-b16", 224, 64, "cuda", "bf16-mixed", bn_shape=(64, 56, 56), ln_shape=(197, 768)
    ),
}
#: Reduced mode (CI): tiny widths and inputs, same code paths.
REDUCED = {"batch_size": 4, "bn_shape": (8, 8, 8), "ln_shape": (8, 16)}
_AUTOCAST_DTYPES = {"16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}


class MethodUnavailable(Exception):
    """A method this backbone cannot be built with (the row says why)."""


@dataclass
class Method:
    """A model to benchmark and how it trains."""

    name: str
    model: nn.Module
    num_estimators: int
    regularizer: Callable[[], Tensor] | None = None
    param_groups: Callable[[float], list] | None = None
    optimizer: torch.optim.Optimizer | None = None
    scaler: torch.amp.GradScaler | None = None


# ---------------------------------------------------------------- backbones and methods
def _resnet_family(preset: Preset, reduced: bool) -> dict[str, Callable]:
    from torch_uncertainty.models.classification import batched_resnet, packed_resnet, resnet

    width, classes = (0.125 if reduced else 1.0), preset.num_classes
    return {
        "single": lambda: resnet(3, classes, 18, style="cifar", width_multiplier=width),
        "packed": lambda m: packed_resnet(
            3, classes, 18, m, alpha=2, gamma=2, style="cifar", width_multiplier=width
        ),
        "batched": lambda m: batched_resnet(
            3, classes, 18, m, style="cifar", width_multiplier=width, repeat_strategy="legacy"
        ),
    }


def _wideresnet_family(preset: Preset, reduced: bool) -> dict[str, Callable]:
    from torch_uncertainty.models.classification.wideresnet.batched import (
        _BatchWideResNet,
        batched_wideresnet28x10,
    )
    from torch_uncertainty.models.classification.wideresnet.packed import (
        _PackedWideResNet,
        packed_wideresnet28x10,
    )
    from torch_uncertainty.models.classification.wideresnet.std import (
        _WideResNet,
        wideresnet28x10,
    )

    classes = preset.num_classes
    if not reduced:
        return {
            "single": lambda: wideresnet28x10(3, classes, style="cifar"),
            "packed": lambda m: packed_wideresnet28x10(3, classes, m, 2, 2, style="cifar"),
            "batched": lambda m: batched_wideresnet28x10(
                3, classes, m, style="cifar", repeat_strategy="legacy"
            ),
        }
    common = {
        "depth": 28,
        "widen_factor": 1,
        "in_channels": 3,
        "num_classes": classes,
        "conv_bias": True,
        "dropout_rate": 0.3,
        "style": "cifar",
    }
    return {
        "single": lambda: _WideResNet(**common),
        "packed": lambda m: _PackedWideResNet(**common, num_estimators=m, alpha=2, gamma=2),
        "batched": lambda m: _BatchWideResNet(**common, num_estimators=m),
    }


def _vit_family(preset: Preset, reduced: bool) -> dict[str, Callable]:
    import timm
    from timm.models.vision_transformer import VisionTransformer

    classes = preset.num_classes

    def single() -> nn.Module:
        if reduced:
            return VisionTransformer(
                img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=classes
            )
        return timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=classes)

    def batched(m: int) -> nn.Module:
        from torch_uncertainty.methods import batch_ensemble

        try:
            return batch_ensemble(single(), m, convert_layers=True)
        except RuntimeError as error:  # its converter renames modules while iterating them
            raise MethodUnavailable(
                f"TorchUncertainty's batch_ensemble fails on ViT: {error}"
            ) from error

    def packed(m: int) -> nn.Module:
        raise MethodUnavailable("TorchUncertainty 0.13 has no Packed-Ensembles ViT")

    return {"single": single, "packed": packed, "batched": batched}


FAMILIES = {"resnet18": _resnet_family, "wrn28-10": _wideresnet_family, "vit-b16": _vit_family}


def method_names(preset: Preset) -> list[str]:
    """Rows of the table, in order (LoRA-Ensemble only on transformers)."""
    names = [SINGLE, DEEP, PACKED, BATCHED, FILM]
    if preset.backbone.startswith("vit"):
        names.append(LORA)
    return [*names, SIGNORM, SIGNORM_AT_INPUT]


def _baseline(name: str) -> Callable:
    """A FiLM/LoRA-Ensemble factory from the package's baselines, when it is installed."""
    try:
        from torch_uncertainty_signorm import baselines
    except ImportError as error:
        raise MethodUnavailable(f"signorm_lab.baselines not available ({error})") from error
    if not hasattr(baselines, name):
        raise MethodUnavailable(f"signorm_lab.baselines has no {name}")
    return getattr(baselines, name)


def build_method(name: str, preset: Preset, num_estimators: int, reduced: bool) -> Method:
    """Build one row's model from a fresh backbone (raises :class:`MethodUnavailable`)."""
    family = FAMILIES[preset.backbone](preset, reduced)
    m, classes = num_estimators, preset.num_classes
    if name == SINGLE:
        return Method(name, family["single"](), 1)
    if name == DEEP:
        from torch_uncertainty.methods import deep_ensembles

        return Method(name, deep_ensembles(family["single"](), num_estimators=m), m)
    if name == PACKED:
        return Method(name, family["packed"](m), m)
    if name == BATCHED:
        return Method(name, family["batched"](m), m)
    if name == FILM:
        film_ensemble = _baseline("film_ensemble")
        if preset.backbone.startswith("vit"):
            raise MethodUnavailable("FiLM-Ensemble modulates BatchNorm layers; a ViT has none")
        return Method(name, film_ensemble(family["single"](), m, num_classes=classes), m)
    if name == LORA:
        return Method(
            name, _baseline("lora_ensemble")(family["single"](), m, num_classes=classes), m
        )
    if name in (SIGNORM, SIGNORM_AT_INPUT):
        expand_at = "auto" if name == SIGNORM else "input"
        model = signorm_ensemble(family["single"](), m, num_classes=classes, expand_at=expand_at)
        return Method(
            name,
            model,
            m,
            model.diversity_loss,
            lambda lr, model=model: signorm_param_groups(model, lr),
        )
    raise ValueError(f"Unknown method {name!r}; valid: {method_names(preset)}.")


# ---------------------------------------------------------------- measurement
class Runner:
    """Device, precision and the step functions shared by every measurement."""

    def __init__(self, device: torch.device, precision: str, channels_last: bool) -> None:
        if precision not in ("32-true", *_AUTOCAST_DTYPES):
            raise ValueError(
                f"precision must be 32-true, 16-mixed or bf16-mixed, got {precision!r}."
            )
        self.device, self.precision, self.channels_last = device, precision, channels_last
        self.dtype = _AUTOCAST_DTYPES.get(precision)

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def prepare(self, method: Method, lr: float = 0.05) -> None:
        """Move to the device and attach the optimizer (and fp16 loss scaler)."""
        memory_format = torch.channels_last if self.channels_last else torch.preserve_format
        method.model.to(self.device, memory_format=memory_format)
        groups = method.param_groups(lr) if method.param_groups else method.model.parameters()
        method.optimizer = torch.optim.SGD(groups, lr=lr, momentum=0.9, weight_decay=5e-4)
        enabled = self.precision == "16-mixed" and self.device.type == "cuda"
        method.scaler = torch.amp.GradScaler(self.device.type, enabled=enabled)

    def train_step(self, method: Method, inputs: Tensor, targets: Tensor) -> None:
        model, optimizer, scaler = method.model.train(), method.optimizer, method.scaler
        optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            logits = model(inputs)
            loss = F.cross_entropy(logits.float(), targets.repeat(method.num_estimators))
            if method.regularizer is not None:
                loss = loss + method.regularizer()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    def eval_step(self, method: Method, inputs: Tensor) -> Tensor:
        with torch.inference_mode(), self.autocast():
            return method.model.eval()(inputs)

    def predict_step(self, method: Method, inputs: Tensor) -> None:
        with self.autocast():
            predict(method.model, inputs)

    def seconds(self, fn: Callable[[], object], iterations: int) -> float:
        """Mean wall time of ``iterations`` calls, the device synchronised at both ends."""
        self.sync()
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        self.sync()
        return (time.perf_counter() - start) / iterations

    def peak_memory(self, method: Method, inputs: Tensor, targets: Tensor) -> float:
        """Peak bytes of one training step: weights, gradients, optimizer state, activations.

        Only this method's memory counts, though every method's model stays on the device.
        """
        persistent = [*method.model.parameters(), *method.model.buffers()]
        persistent += [
            value
            for state in method.optimizer.state.values()
            for value in state.values()
            if isinstance(value, Tensor)
        ]
        if self.device.type == "cuda":
            method.optimizer.zero_grad(set_to_none=True)
            self.sync()
            others = torch.cuda.memory_allocated(self.device) - _storage_bytes(persistent)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.train_step(method, inputs, targets)
            self.sync()
            return float(torch.cuda.max_memory_allocated(self.device) - others)
        with TensorMemoryPeak(persistent) as tracker:
            self.train_step(method, inputs, targets)
        return float(tracker.peak)


def _storage_bytes(tensors: Sequence[Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors``."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


class TensorMemoryPeak(TorchDispatchMode):
    """Peak bytes of live tensor storages: the CPU counterpart of ``max_memory_allocated``.

    Counts the ``persistent`` tensors (weights, buffers, optimizer state) and every storage
    an operation creates inside the context, each until it is freed (autograd's saved
    tensors and the gradients included).
    """

    def __init__(self, persistent: Sequence[Tensor]) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._seen = WeakIdKeyDictionary()
        for tensor in persistent:
            self._track(tensor)

    def _track(self, tensor: Tensor) -> None:
        storage = tensor.untyped_storage()
        if storage in self._seen:
            return
        size = storage.nbytes()
        self._seen[storage] = size
        self.live += size
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._release, size)

    def _release(self, size: int) -> None:
        self.live -= size

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in tree_flatten(out)[0]:
            if isinstance(value, Tensor) and value.device.type != "meta":
                self._track(value)
        return out


def multiply_adds_per_image(runner: Runner, method: Method, inputs: Tensor) -> float:
    """Multiply-adds of one evaluation forward per input image, summed over members."""
    counter = FlopCounterMode(display=False)
    with counter:
        runner.eval_step(method, inputs)
    return counter.get_total_flops() / 2 / inputs.shape[0]


def _median_ms(samples: Sequence[float]) -> float:
    return 1e3 * statistics.median(samples)


@dataclass
class Row:
    """One method's measurements (``None`` where not measured)."""

    name: str
    params: int | None = None
    madds: float | None = None
    train_ms: float | None = None
    eval_ips: float | None = None
    peak_mb: float | None = None
    unavailable: str | None = None
    train_spread: float | None = None  # slowest / fastest training-step sample


@dataclass
class Report:
    """Everything the benchmark measured, and the target verdicts."""

    preset: str
    rows: dict[str, Row]
    norm_ms: dict[str, float] = field(default_factory=dict)
    norm_shapes: dict[str, tuple] = field(default_factory=dict)
    targets: list[tuple[bool, str]] = field(default_factory=list)
    num_estimators: int = 4
    #: σNorm layers under ``torch.compile`` (``--compile-norms``), timed beside the others.
    compiled_norm_ms: dict[str, float] = field(default_factory=dict)
    #: Normalization kernels one σN-Ens forward dispatches, and its σNorm layers (heads included).
    norm_kernels: int | None = None
    signorm_layers: int | None = None


class NormKernelCounter(TorchDispatchMode):
    """Counts the forward normalization kernels dispatched inside it (the launch count)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if "backward" not in name and (any(op in name for op in _NORM_OPS) or name == "rsqrt"):
            self.count += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def rows_per_pass(model: nn.Module, rows: int | None):
    """Evaluate a σN-Ens in parts of ``rows`` backbone rows (``None``: all B·M rows at once)."""
    saved = model.eval_chunk_size
    model.eval_chunk_size = rows
    try:
        yield
    finally:
        model.eval_chunk_size = saved


def parts_row(rows: int) -> str:
    """Name of the row timing σN-Ens evaluation in parts of ``rows`` backbone rows."""
    return f"σN-Ens, eval in parts of {rows} rows"


def count_norm_kernels(runner: Runner, method: Method, inputs: Tensor) -> int:
    """Normalization kernels of one evaluation pass of ``method`` over all B·M rows."""
    with rows_per_pass(method.model, None), NormKernelCounter() as counter:
        runner.eval_step(method, inputs)
    return counter.count


def _norm_pairs(
    preset: Preset, m: int, batch: int
) -> list[tuple[str, nn.Module, str, nn.Module, tuple]]:
    channels, tokens_dim = preset.bn_shape[0], preset.ln_shape[-1]
    return [
        (
            "σBN2d",
            SigmaBatchNorm2d(channels, m),
            "BatchNorm2d",
            nn.BatchNorm2d(channels),
            (m * batch, *preset.bn_shape),
        ),
        (
            "σLN",
            SigmaLayerNorm(tokens_dim, m),
            "LayerNorm",
            nn.LayerNorm(tokens_dim),
            (m * batch, *preset.ln_shape),
        ),
    ]


def _eval_in_parts(runner: Runner, method: Method, inputs: Tensor, rows: int | None) -> None:
    with rows_per_pass(method.model, rows):
        runner.eval_step(method, inputs)


def run_benchmark(
    preset_name: str,
    *,
    num_estimators: int = 4,
    reduced: bool = False,
    repeats: int = 5,
    warmup: int = 2,
    steps: int = 1,
    device: str | None = None,
    channels_last: bool = False,
    methods: Sequence[str] | None = None,
    compile_norms: bool = False,
    eval_parts: Sequence[int] = (),
    log: Callable[[str], None] = print,
) -> Report:
    """Measure every method of ``preset_name`` interleaved; see the module docstring."""
    if preset_name not in PRESETS:
        raise ValueError(f"Unknown preset {preset_name!r}; valid: {sorted(PRESETS)}.")
    preset = PRESETS[preset_name]
    if reduced:
        preset = Preset(**{**preset.__dict__, **REDUCED, "image_size": 32})
    runner = Runner(torch.device(device or preset.device), preset.precision, channels_last)
    if runner.device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    names = list(methods) if methods is not None else method_names(preset)
    rows = {name: Row(name) for name in names}
    built: dict[str, Method] = {}
    for name in names:
        try:
            method = build_method(name, preset, num_estimators, reduced)
        except MethodUnavailable as reason:
            rows[name].unavailable = str(reason)
            log(f"{name}: unavailable ({reason})")
            continue
        runner.prepare(method)
        built[name] = method
        rows[name].params = sum(p.numel() for p in method.model.parameters())

    generator = torch.Generator().manual_seed(0)
    size, batch = preset.image_size, preset.batch_size
    inputs = torch.randn(batch, 3, size, size, generator=generator).to(runner.device)
    if channels_last:
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    targets = torch.randint(0, preset.num_classes, (batch,), generator=generator).to(runner.device)

    for name, method in built.items():  # warm-up: allocator, cuDNN autotuning, first-call checks
        for _ in range(warmup):
            runner.train_step(method, inputs, targets)
            runner.eval_step(method, inputs)
        rows[name].madds = multiply_adds_per_image(runner, method, inputs)
        rows[name].peak_mb = runner.peak_memory(method, inputs, targets) / 2**20
    signorm = built.get(SIGNORM)
    pairs = _norm_pairs(preset, num_estimators, batch)
    norm_inputs = {}
    for sigma_name, sigma, _plain_name, plain, shape in pairs:
        for layer in (sigma, plain):
            layer.to(runner.device).train()
        x = torch.randn(shape, device=runner.device, dtype=runner.dtype or torch.float32)
        norm_inputs[sigma_name] = (x.requires_grad_(True), torch.randn_like(x))

    def norm_step(layer: nn.Module, key: str) -> None:
        x, grad = norm_inputs[key]
        x.grad = None
        with runner.autocast():
            out = layer(x)
        out.backward(grad.to(out.dtype))

    timed: dict[str, Callable[[], object]] = {}
    for name, method in built.items():
        timed[f"train:{name}"] = lambda m=method: runner.train_step(m, inputs, targets)
        timed[f"eval:{name}"] = lambda m=method: runner.eval_step(m, inputs)
    if signorm is not None:
        timed["predict"] = lambda: runner.predict_step(signorm, inputs)
        timed["eval-one-pass"] = lambda: _eval_in_parts(runner, signorm, inputs, None)
        for part in eval_parts:
            timed[f"eval-parts:{part}"] = lambda r=part: _eval_in_parts(runner, signorm, inputs, r)
    for sigma_name, sigma, plain_name, plain, _ in pairs:
        timed[f"norm:{sigma_name}"] = lambda layer=sigma, k=sigma_name: norm_step(layer, k)
        timed[f"norm:{plain_name}"] = lambda layer=plain, k=sigma_name: norm_step(layer, k)
        for _ in range(warmup):
            norm_step(sigma, sigma_name)
            norm_step(plain, sigma_name)
        if compile_norms:  # the fused kernel torch.compile generates; compiled here, untimed
            compiled = torch.compile(sigma)
            try:
                norm_step(compiled, sigma_name)
            except Exception as error:
                log(f"{sigma_name} under torch.compile: unavailable ({type(error).__name__})")
                continue
            timed[f"compiled:{sigma_name}"] = lambda layer=compiled, k=sigma_name: norm_step(
                layer, k
            )

    samples: dict[str, list[float]] = {key: [] for key in timed}
    keys = list(timed)
    for repeat in range(repeats):
        shift = repeat % len(keys)
        for key in keys[shift:] + keys[:shift]:  # rotated order: no method always runs first
            samples[key].append(runner.seconds(timed[key], steps))
        log(f"repeat {repeat + 1}/{repeats} done")

    for name in built:
        rows[name].train_ms = _median_ms(samples[f"train:{name}"])
        rows[name].train_spread = max(samples[f"train:{name}"]) / min(samples[f"train:{name}"])
        rows[name].eval_ips = batch / statistics.median(samples[f"eval:{name}"])
    if signorm is not None:
        rows[PREDICT_ROW] = Row(PREDICT_ROW, eval_ips=batch / statistics.median(samples["predict"]))
        rows[ONE_PASS_ROW] = Row(
            ONE_PASS_ROW, eval_ips=batch / statistics.median(samples["eval-one-pass"])
        )
        for part in eval_parts:
            ips = batch / statistics.median(samples[f"eval-parts:{part}"])
            rows[parts_row(part)] = Row(parts_row(part), eval_ips=ips)
    report = Report(preset_name, rows, num_estimators=num_estimators)
    if signorm is not None:
        report.norm_kernels = count_norm_kernels(runner, signorm, inputs)
        report.signorm_layers = len(signorm.model.signorm_layer_names) + 1
    for sigma_name, _, plain_name, _, shape in pairs:
        report.norm_ms[sigma_name] = _median_ms(samples[f"norm:{sigma_name}"])
        report.norm_ms[plain_name] = _median_ms(samples[f"norm:{plain_name}"])
        report.norm_shapes[sigma_name] = shape
        if f"compiled:{sigma_name}" in samples:
            report.compiled_norm_ms[sigma_name] = _median_ms(samples[f"compiled:{sigma_name}"])
    report.targets = evaluate_targets(report, [(s, p) for s, _, p, _, _ in pairs])
    return report


# ---------------------------------------------------------------- targets and table
def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def evaluate_targets(
    report: Report, norm_pairs: Sequence[tuple[str, str]]
) -> list[tuple[bool, str]]:
    """PASS/MISS verdict of every target the σN-Ens rows can be checked against."""
    rows, m = report.rows, report.num_estimators
    sig, deep, single, at_input = (rows.get(n) for n in (SIGNORM, DEEP, SINGLE, SIGNORM_AT_INPUT))
    verdicts = []

    def check(ratio: float | None, bound: float, text: str, at_least: bool = False) -> None:
        if ratio is None:
            verdicts.append((False, f"{text}: not measured"))
        else:
            ok = ratio >= bound if at_least else ratio <= bound
            kind = "at least" if at_least else "bound"
            verdicts.append((ok, f"{text}: {ratio:.3f} ({kind} {bound:.3f})"))

    def get(row, attr):
        return None if row is None else getattr(row, attr)

    check(
        _ratio(get(sig, "train_ms"), get(deep, "train_ms")),
        MAX_STEP_VS_DEEP,
        "σN-Ens training step / Deep Ensembles' step",
    )
    check(
        _ratio(get(sig, "eval_ips"), get(deep, "eval_ips")),
        MIN_EVAL_VS_DEEP,
        "σN-Ens evaluation throughput / Deep Ensembles'",
        at_least=True,
    )
    check(
        _ratio(get(sig, "train_ms"), get(single, "train_ms")),
        MAX_STEP_VS_M_SINGLE * m,
        f"σN-Ens training step / single model's step (bound 1.1 × M, M = {m})",
    )
    check(
        _ratio(get(sig, "params"), get(single, "params")),
        MAX_PARAMS_VS_SINGLE,
        "σN-Ens parameters / single model's",
    )
    for sigma_name, plain_name in norm_pairs:
        shape = report.norm_shapes[sigma_name]
        check(
            _ratio(report.norm_ms[sigma_name], report.norm_ms[plain_name]),
            MAX_NORM_OVERHEAD[sigma_name],
            f"{sigma_name} / {plain_name} forward+backward on {shape}",
        )
    check(
        _ratio(get(sig, "train_ms"), get(at_input, "train_ms")),
        1.0 - 1e-9,
        "late expansion: σN-Ens training step / expand-at-input step (must be < 1)",
    )
    check(
        _ratio(get(sig, "madds"), get(at_input, "madds")),
        1.0 - 1e-9,
        "late expansion: σN-Ens MAdds / expand-at-input MAdds (must be < 1)",
    )
    return verdicts


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def format_table(report: Report) -> str:
    """The ratio table: each method against the single model and against Deep Ensembles."""
    rows = report.rows
    single, deep = rows.get(SINGLE), rows.get(DEEP)
    header = [
        "Method",
        "Params (M)",
        "×single",
        "MAdds/img (G)",
        "Train step (ms)",
        "×single",
        "×DE",
        "Eval (img/s)",
        "×single",
        "×DE",
        "Peak mem (MB)",
        "×single",
        "×DE",
    ]
    lines = [header]
    for row in rows.values():
        if row.unavailable:
            lines.append([row.name, f"unavailable: {row.unavailable}"] + [""] * (len(header) - 2))
            continue

        def ref(attr, base, row=row):
            return _fmt(_ratio(getattr(row, attr), base and getattr(base, attr)), ".2f")

        lines.append(
            [
                row.name,
                _fmt(row.params and row.params / 1e6, ".2f"),
                ref("params", single),
                _fmt(row.madds and row.madds / 1e9, ".3f"),
                _fmt(row.train_ms, ".1f"),
                ref("train_ms", single),
                ref("train_ms", deep),
                _fmt(row.eval_ips, ".1f"),
                ref("eval_ips", single),
                ref("eval_ips", deep),
                _fmt(row.peak_mb, ".1f"),
                ref("peak_mb", single),
                ref("peak_mb", deep),
            ]
        )
    widths = [
        max(
            len(line[i])
            for line in lines
            if len(line) > i and not line[1].startswith("unavailable")
        )
        for i in range(len(header))
    ]
    out = []
    for index, line in enumerate(lines):
        if line[1].startswith("unavailable"):
            out.append(f"| {line[0]:<{widths[0]}} | {line[1]} |")
        else:
            out.append(
                "| "
                + " | ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
                + " |"
            )
        if index == 0:
            out.append("|" + "|".join("-" * (width + 2) for width in widths) + "|")
    norms = []
    plain_of = dict(zip(list(report.norm_ms)[::2], list(report.norm_ms)[1::2], strict=True))
    for sigma_name, plain_name in plain_of.items():
        sigma_ms, plain_ms = report.norm_ms[sigma_name], report.norm_ms[plain_name]
        norms.append(
            f"| {sigma_name} {sigma_ms:.2f} ms | {plain_name} {plain_ms:.2f} ms | "
            f"×{sigma_ms / plain_ms:.2f} | on {report.norm_shapes[sigma_name]} |"
        )
    for sigma_name, compiled_ms in report.compiled_norm_ms.items():
        plain_name = plain_of[sigma_name]
        norms.append(
            f"| {sigma_name} under torch.compile {compiled_ms:.2f} ms | {plain_name} "
            f"{report.norm_ms[plain_name]:.2f} ms | ×{compiled_ms / report.norm_ms[plain_name]:.2f}"
            f" | on {report.norm_shapes[sigma_name]} (not a target: the eager layer is) |"
        )
    verdicts = [f"{'PASS' if ok else 'MISS'}  {text}" for ok, text in report.targets]
    if report.norm_kernels is not None:
        norms.append(
            f"Normalization kernels per σN-Ens pass over all B·M rows: {report.norm_kernels} for "
            f"{report.signorm_layers} σNorm layers (heads included), M = {report.num_estimators}"
        )
    spreads = ", ".join(
        f"{row.name} {row.train_spread:.2f}" for row in rows.values() if row.train_spread
    )
    spread = f"Training-step spread over repeats (slowest / fastest sample): {spreads}"
    return "\n".join(
        [*out, "", spread, "", "Norm layer forward+backward, in isolation:", *norms, "", *verdicts]
    )


#: Environment variables that change how freed CPU memory is reused (glibc tunables, preloads).
_ALLOCATOR_ENV = (
    "GLIBC_TUNABLES",
    "LD_PRELOAD",
    "MALLOC_MMAP_MAX_",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "THP_MEM_ALLOC_ENABLE",
)


def environment() -> str:
    """Device name, software versions and date, for the record."""
    import lightning
    import torch_uncertainty

    if torch.cuda.is_available():
        device = torch.cuda.get_device_name()
    else:
        device = platform.processor() or "unknown CPU"
        with contextlib.suppress(OSError):
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    device = line.split(":", 1)[1].strip()
                    break
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    allocator = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k in _ALLOCATOR_ENV]
    return (
        f"device: {device}; threads: {torch.get_num_threads()}; load average {load} on "
        f"{os.cpu_count()} cores; python {platform.python_version()}; "
        f"torch {torch.__version__}; torch-uncertainty {torch_uncertainty.__version__}; "
        f"lightning {lightning.__version__}; date {datetime.date.today().isoformat()}; "
        f"allocator: {' '.join(allocator) or 'default'}"
    )


def write_csv(report: Report, path: Path) -> None:
    fields = ["name", "params", "madds", "train_ms", "eval_ips", "peak_mb", "unavailable"]
    with Path(path).open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(fields)
        for row in report.rows.values():
            writer.writerow([getattr(row, name) for name in fields])
        for name, ms in report.norm_ms.items():
            writer.writerow([f"norm:{name}", "", "", ms, "", "", ""])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu-resnet18")
    parser.add_argument("--num-estimators", type=int, default=4, help="members M (default 4)")
    parser.add_argument(
        "--reduced",
        action="store_true",
        help="tiny widths and batch, for CI: checks the code paths, not the speed",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="interleaved timing rounds; medians are reported (default 5)",
    )
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per method first")
    parser.add_argument("--steps", type=int, default=1, help="steps per timing sample")
    parser.add_argument("--device", default=None, help="override the preset's device")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU intra-op threads (default: torch's); 1 is steadiest on a shared machine",
    )
    parser.add_argument("--channels-last", action="store_true", help="channels_last memory format")
    parser.add_argument("--methods", nargs="+", default=None, help="only these rows")
    parser.add_argument("--csv", type=Path, default=None, help="also write the raw numbers here")
    parser.add_argument(
        "--eval-parts",
        type=int,
        nargs="+",
        default=[],
        metavar="ROWS",
        help="also time σN-Ens evaluation in parts of these many backbone rows",
    )
    parser.add_argument(
        "--compile-norms",
        action="store_true",
        help="also time each σNorm layer under torch.compile (needs a C++ compiler on CPU)",
    )
    args = parser.parse_args(argv)
    for rows in args.eval_parts:
        if rows < 1:
            parser.error(f"--eval-parts takes row counts >= 1, got {rows}")
    for name in ("num_estimators", "repeats", "steps") + (("threads",) if args.threads else ()):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must be >= 0, got {args.warmup}")
    return args


def main(argv: Sequence[str] | None = None) -> Report:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    def log(text):
        print(text, file=sys.stderr, flush=True)

    report = run_benchmark(
        args.preset,
        num_estimators=args.num_estimators,
        reduced=args.reduced,
        repeats=args.repeats,
        warmup=args.warmup,
        steps=args.steps,
        device=args.device,
        channels_last=args.channels_last,
        methods=args.methods,
        compile_norms=args.compile_norms,
        eval_parts=args.eval_parts,
        log=log,
    )
    command = "python benchmarks/throughput.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(
        f"# {args.preset}, M = {args.num_estimators}, {args.repeats} interleaved repeats "
        f"(medians), {args.warmup} warm-up steps{', reduced' if args.reduced else ''}"
    )
    print(f"# {environment()}")
    print(f"# command: {command.strip()}")
    print(format_table(report))
    if args.csv is not None:
        write_csv(report, args.csv)
    return report


if __name__ == "__main__":
    main()
