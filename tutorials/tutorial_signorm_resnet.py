r"""
Training a σNorm-Ensemble of ResNet-18 on Digits
================================================

In this tutorial, we turn a TorchUncertainty ResNet-18 into a σNorm-Ensemble (σN-Ens): an
implicit ensemble of M members that share every backbone weight and differ only in their
normalization layers. Each normalization layer of member :math:`m` scales its features by
:math:`\sigma(\gamma_m)`, a learned *importance* in :math:`(0, 1)`, and a softmax-temperature
regularizer with temperature :math:`\tau` decides how much the members share each feature:
a low :math:`\tau` pushes every feature towards a single owner, hence diverse members.

We train on scikit-learn's bundled ``digits`` (1797 grayscale 8×8 images, nothing to
download) on the CPU for three epochs, evaluate with TorchUncertainty's metrics, and look at
which members own which features.

1. Loading the utilities
~~~~~~~~~~~~~~~~~~~~~~~~

We need:

- the TUTrainer from TorchUncertainty's utils,
- the datamodule: ``DigitsDataModule``, with pixel-permuted digits as out-of-distribution set,
- the model: TorchUncertainty's ``resnet``, wrapped by ``signorm_ensemble``,
- the routine: ``SigmaNormClassificationRoutine``, TorchUncertainty's classification routine
  plus the diversity regularizer,
- ``signorm_optim_recipe``, which turns an ``optim_recipe`` (TorchUncertainty's way of giving a
  routine its optimizer) into its σN-Ens version: the σNorm scale logits at 100× the learning
  rate under SGD (3× under Adam-type optimisers) without weight decay.
  ``torch_uncertainty_signorm.optim_recipes`` holds those of TorchUncertainty's recipes
  (``optim_cifar10_resnet18`` ...).
"""

# %%
import os
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from lightning.pytorch import seed_everything
from torch import nn
from torch_uncertainty.models.classification import resnet
from torch_uncertainty.utils import TUTrainer

from signorm_lab.cli.console import silence_library_noise
from signorm_lab.datamodules import DigitsDataModule
from torch_uncertainty_signorm import ownership_counts, signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.signorm.optim import signorm_optim_recipe

seed_everything(0)
torch.set_num_threads(1)  # 8×8 images are too small to gain from more CPU threads
# As the torch-uncertainty command: libraries' tips and deprecations, and Lightning's reminder
# (once per metric) that this trainer has no logger (logger=False below), are not printed.
silence_library_noise()

# %%
# 2. The datamodule and the model
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# The datamodule splits the digits into 1149 training, 288 validation and 360 test images;
# ``eval_ood=True`` adds 360 test images whose pixels are shuffled, as OOD set.
#
# We build TorchUncertainty's CIFAR-style ResNet-18 at a quarter of its width (16 to 128
# channels, enough for 8×8 images) and wrap it into a σN-Ens of M = 4 members. The wrapper
# replaces every BatchNorm by a σBatchNorm holding the four members, and the classifier by
# four member heads. ``regularized_layers="resnet18"`` applies the regularizer to the second
# normalization layer of each residual block, as in the paper.

datamodule = DigitsDataModule(batch_size=64, eval_ood=True)

num_estimators = 4
model = signorm_ensemble(
    resnet(
        datamodule.num_channels, datamodule.num_classes, 18, style="cifar", width_multiplier=0.25
    ),
    num_estimators,
    regularized_layers="resnet18",
    tau=0.1,  # the diversity control
    diversity_strength=1e-2,  # the regularizer's weight λ
)
print(
    f"{len(model.signorm_layer_names)} σNorm layers, "
    f"{len(model.regularized_layer_names)} of them regularized"
)

# %%
# The model takes a batch of B images and returns the member-major logits of shape
# :math:`(M \times B, C)`, the format of every TorchUncertainty ensemble.

print(model(torch.randn(2, 1, 8, 8)).shape)

# %%
# 3. The routine and the trainer
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# ``SigmaNormClassificationRoutine`` keeps every argument and metric of TorchUncertainty's
# ``ClassificationRoutine``; it sets ``is_ensemble=True`` and repeats the targets for the M
# members, and adds the regularizer to the cross-entropy. The optimizer is SGD, with the
# σNorm scale logits in their own parameter group.

routine = SigmaNormClassificationRoutine(
    model,
    datamodule.num_classes,
    nn.CrossEntropyLoss(),
    optim_recipe=signorm_optim_recipe(
        lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    ),
    eval_ood=True,
)
trainer = TUTrainer(
    accelerator="cpu",
    max_epochs=3,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)

# %%
# 4. Training and testing
# ~~~~~~~~~~~~~~~~~~~~~~~
#
# ``trainer.test`` reports TorchUncertainty's metrics: accuracy, NLL and calibration on the
# test digits, the OOD detection AUROC against the shuffled digits, the ensemble's mutual
# information (``test/ens_MI``), and the σN-Ens diversity measures (``test/div/...``).

trainer.fit(routine, datamodule)
results = trainer.test(routine, datamodule)[0]
for key in (
    "test/cls/Acc",
    "test/cls/NLL",
    "test/cal/ECE",
    "ood/AUROC",
    "test/div/signorm_cos_regularized",
):
    print(f"{key}: {results[key]:.3f}")

# %%
# 5. Who owns which feature?
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# A member *owns* a feature when its importance :math:`\sigma(\gamma)` is above 0.5.
# ``ownership_counts`` counts the features owned by k = 0, ..., M members. In the regularized
# layers the low temperature drives each feature towards a single owner (k = 1) and the
# importances to 0 or 1; over all layers, which include the unregularized ones, ownership
# and importances stay spread out. The figure is written to ``$SIGNORM_TUTORIAL_FIGURE``,
# by default into the system's temporary directory.

importances = {
    "all layers": model.importances(),
    "regularized layers": model.importances(regularized_only=True),
}
fig, (ax_own, ax_hist) = plt.subplots(1, 2, figsize=(10, 4))
width = 0.4
for i, (label, layer_importances) in enumerate(importances.items()):
    counts = ownership_counts(layer_importances)
    shares = (counts / counts.sum()).numpy()
    ax_own.bar(
        torch.arange(num_estimators + 1).numpy() + (i - 0.5) * width, shares, width, label=label
    )
    values = torch.cat([imp.flatten() for imp in layer_importances]).detach().numpy()
    ax_hist.hist(values, bins=40, range=(0, 1), density=True, alpha=0.6, label=label)
ax_own.set(
    xlabel="number of owning members k",
    ylabel="share of features",
    title="Feature ownership",
    xticks=range(num_estimators + 1),
)
ax_hist.set(xlabel="importance σ(γ)", ylabel="density", title="Member importances")
ax_own.legend()
ax_hist.legend()
fig.tight_layout()

default_figure = Path(tempfile.gettempdir()) / "torch_uncertainty_signorm" / "ownership.png"
figure_path = Path(os.environ.get("SIGNORM_TUTORIAL_FIGURE", default_figure))
figure_path.parent.mkdir(parents=True, exist_ok=True)
fig.savefig(figure_path, dpi=100)
print(f"Figure saved to {figure_path}")

# %%
# After only three epochs, the members already split the regularized features between them
# while sharing most of the others: the diversity is where, and as strong as, :math:`\tau`
# asks for. Lower :math:`\tau` for more diverse members, raise it for members that share more.
