"""Regularized-layer presets of the paper and peft-style name patterns."""

import pytest

from fixtures.backbones import tiny_bert, tiny_resnet, tiny_vit, tiny_wideresnet
from torch_uncertainty_signorm import find_norm_layers, select_layers


@pytest.mark.parametrize(
    ("make_model", "preset", "count", "suffixes"),
    [
        (lambda: tiny_resnet(18), "resnet18", 8, ("bn2",)),  # 4 stages x 2 basic blocks
        (lambda: tiny_resnet(50), "resnet50", 32, ("bn1", "bn3")),  # 16 bottlenecks x 2
        (tiny_wideresnet, "wideresnet28x10", 12, ("bn1",)),  # 3 stages x 4 blocks
        (tiny_vit, "transformer", 2, ("norm2",)),  # one FFN norm per block
        (tiny_bert, "transformer", 2, ("output.LayerNorm",)),
    ],
)
def test_paper_presets_pick_one_layer_kind_per_block(make_model, preset, count, suffixes):
    names = find_norm_layers(make_model())
    selected = select_layers(names, preset)
    assert len(selected) == count
    assert all(name.endswith(suffixes) for name in selected)
    assert not any("shortcut" in n or "downsample" in n or "attention" in n for n in selected)


def test_all_regex_and_suffix_list_selection():
    names = ["bn1", "layer1.0.bn1", "layer1.0.bn2", "layer2.0.bn2", "layer2.0.shortcut.1"]
    assert select_layers(names, "all") == names
    assert select_layers(names, r"layer\d\.0\.bn2") == ["layer1.0.bn2", "layer2.0.bn2"]
    assert select_layers(names, ["bn1"]) == ["bn1", "layer1.0.bn1"]
    assert select_layers(names, ["layer2.0.shortcut.1", "bn2"]) == names[2:]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("resnet18", r"preset 'resnet18' matches no σNorm layer.*Available layers: norm1, norm2"),
        (r"blocks\.\d+\.mlp", r"pattern 'blocks\\\\.\\\\d\+\\\\.mlp' matches no σNorm layer"),
        (["norm3"], r"entry 'norm3' matches no σNorm layer. Available layers: norm1, norm2"),
        ("[", r"neither a preset .* nor a valid regex"),
        ([], "must be a preset name, a regex or a non-empty list"),
    ],
)
def test_unmatched_or_invalid_specs_list_what_is_available(spec, message):
    with pytest.raises(ValueError, match=message):
        select_layers(["norm1", "norm2"], spec)
