r"""
Training a σNorm-Ensemble of ResNet-18 with TorchUncertainty
============================================================

In this tutorial, we turn TorchUncertainty's ResNet-18 into a σNorm-Ensemble (σN-Ens): an
implicit ensemble of M members that share every backbone weight and differ only in their
normalization layers. Each normalization layer of member :math:`m` scales its features by
:math:`\sigma(\gamma_m)`, a learned *importance* in :math:`(0, 1)`, and a softmax-temperature
regularizer with temperature :math:`\tau` decides how much the members share each feature:
a low :math:`\tau` pushes every feature towards a single owner, hence diverse members.

Only ``torch-uncertainty-signorm`` and what it installs are needed, and nothing is
downloaded: the images are CIFAR-shaped (3×32×32, 10 classes) and generated here. By default
the script trains 24 steps on the CPU, enough to see every part run;
``SIGNORM_TUTORIAL_LONG=1`` trains 20 epochs of 2,048 images instead (1,280 steps). Swap the
loaders for TorchUncertainty's ``CIFAR10DataModule(root="data", batch_size=128)`` to train on
CIFAR-10.

1. Loading the utilities
~~~~~~~~~~~~~~~~~~~~~~~~

We need:

- TorchUncertainty's ``resnet`` builder and its ``TUTrainer``,
- ``signorm_ensemble``, which turns the ResNet into a σN-Ens,
- ``SigmaNormClassificationRoutine``: TorchUncertainty's classification routine plus the
  diversity regularizer,
- ``MemberOwnershipCallback``, which records which members own which features after every
  validation epoch.
"""

# %%
import os
import tempfile
import warnings
from pathlib import Path

import torch
from lightning.pytorch import seed_everything
from matplotlib.figure import Figure
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch_uncertainty.models.classification import resnet
from torch_uncertainty.utils import TUTrainer

from torch_uncertainty_signorm import ownership_counts, signorm_ensemble
from torch_uncertainty_signorm.callbacks import MemberOwnershipCallback
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

seed_everything(0)
torch.set_num_threads(1)  # small images gain little from more CPU threads
LONG_RUN = os.environ.get("SIGNORM_TUTORIAL_LONG") == "1"
EPOCHS, TRAIN_IMAGES = (20, 2048) if LONG_RUN else (1, 768)
OUTPUT = Path(os.environ.get("SIGNORM_TUTORIAL_OUTPUT") or tempfile.mkdtemp(prefix="signorm_"))
# The trainer below has no logger: Lightning's reminder of it, once per metric, is not printed.
warnings.filterwarnings("ignore", message=".*but have no logger configured")

# %%
# 2. The data
# ~~~~~~~~~~~
#
# Each of the 10 classes is a smooth random colour pattern; an image is its class's pattern
# under Gaussian noise. Any loader of ``(images, labels)`` batches works with the routine,
# a plain ``DataLoader`` as here or a TorchUncertainty datamodule.

NUM_CLASSES = 10
PATTERNS = nn.functional.interpolate(
    torch.randn(NUM_CLASSES, 3, 4, 4, generator=torch.Generator().manual_seed(0)),
    size=(32, 32),
    mode="bilinear",
)


def synthetic_images(num_images: int, seed: int) -> TensorDataset:
    """``num_images`` noisy class patterns with their labels, classes in turn."""
    labels = torch.arange(num_images) % NUM_CLASSES
    noise = torch.randn(num_images, 3, 32, 32, generator=torch.Generator().manual_seed(seed))
    return TensorDataset(PATTERNS[labels] + noise, labels)


train_loader = DataLoader(synthetic_images(TRAIN_IMAGES, 1), batch_size=32, shuffle=True)
val_loader = DataLoader(synthetic_images(64, 2), batch_size=64)
test_loader = DataLoader(synthetic_images(128, 3), batch_size=64)

# %%
# 3. The model
# ~~~~~~~~~~~~
#
# We build TorchUncertainty's CIFAR-style ResNet-18 at an eighth of its width (8 to 64
# channels) and wrap it into a σN-Ens of M = 4 members. The wrapper replaces every BatchNorm
# by a σBatchNorm holding the four members, and the classifier by four member heads.
# ``regularized_layers="resnet18"`` applies the regularizer to the second normalization layer
# of each residual block, as in the paper. (Building the ResNet with
# ``normalization_layer=signorm_normalization_layer(4)`` gives the same ensemble.)

num_estimators = 4
model = signorm_ensemble(
    resnet(3, NUM_CLASSES, 18, style="cifar", width_multiplier=0.125),
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

logits = model(torch.randn(2, 3, 32, 32))
print(tuple(logits.shape))

# %%
# 4. The routine and the trainer
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# ``SigmaNormClassificationRoutine`` keeps every argument and metric of TorchUncertainty's
# ``ClassificationRoutine``; it repeats the targets for the M members and adds the regularizer
# to the cross-entropy. Its ``optim_recipe`` is any TorchUncertainty recipe, here a plain SGD:
# the routine builds it on its parameter groups, with the σNorm scale logits at
# ``scale_lr_multiplier`` times the learning rate (the paper's 100) and no weight decay.

routine = SigmaNormClassificationRoutine(
    model,
    NUM_CLASSES,
    nn.CrossEntropyLoss(),
    optim_recipe=lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
    scale_lr_multiplier=100,
)
ownership = MemberOwnershipCallback(dirpath=OUTPUT)
trainer = TUTrainer(
    accelerator="cpu",
    max_epochs=EPOCHS,
    callbacks=[ownership],
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)

# %%
# 5. Training and testing
# ~~~~~~~~~~~~~~~~~~~~~~~
#
# ``trainer.test`` reports TorchUncertainty's metrics (accuracy, NLL, calibration), the
# ensemble's mutual information (``test/ens_MI``) and the σN-Ens diversity measures
# (``test/div/...``).

trainer.fit(routine, train_loader, val_loader)
results = trainer.test(routine, test_loader)[0]
for key in ("test/cls/Acc", "test/cls/NLL", "test/cal/ECE", "test/div/signorm_cos_regularized"):
    print(f"{key}: {results[key]:.3f}")
optimizer = trainer.optimizers[0]
print(
    "learning rates of the optimizer's groups:", [group["lr"] for group in optimizer.param_groups]
)

# %%
# 6. Who owns which feature?
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# A member *owns* a feature when its importance :math:`\sigma(\gamma)` is above 0.5.
# ``ownership_counts`` counts the features owned by k = 0, ..., M members. In the regularized
# layers the low temperature drives each feature towards a single owner (k = 1) and the
# importances to 0 or 1; over all layers, which include the unregularized ones, ownership
# and importances stay spread out. The callback wrote the same counts after every validation
# epoch to ``ownership.csv``, with its figures, in ``OUTPUT``
# (``$SIGNORM_TUTORIAL_OUTPUT``, by default a new folder in the system's temporary directory).

importances = {
    "all layers": model.importances(),
    "regularized layers": model.importances(regularized_only=True),
}
figure = Figure(figsize=(10, 4))
ax_own, ax_hist = figure.subplots(1, 2)
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
figure.tight_layout()
figure_path = OUTPUT / "ownership.png"
figure.savefig(figure_path, dpi=100)
print(f"Figure saved to {figure_path}; the callback's counts: {OUTPUT / 'ownership.csv'}")

# %%
# With the scale logits at 100 times the learning rate, a few steps are enough for the
# members to split most regularized features between them (k = 1), while over all layers
# many features keep several owners: the diversity is where, and as strong as, :math:`\tau`
# asks for. Lower :math:`\tau` for more diverse members, raise it for members that share
# more. The long run (``SIGNORM_TUTORIAL_LONG=1``, about 8 minutes of one CPU thread) fits
# these easy patterns perfectly, and its regularized features keep the owners these first
# steps gave them.
