# The public names: read by type checkers, and by ``lazy_loader.attach_stub`` in __init__.py,
# which imports each name's module on first use.
from .backbones import SequenceClassifier as SequenceClassifier
from .backbones import bert_classifier as bert_classifier
from .backbones import bert_config as bert_config
from .backbones import timm_vit as timm_vit
from .backbones import wideresnet28 as wideresnet28
from .finetune import finetune_ensemble as finetune_ensemble
from .finetune import load_single_model as load_single_model
from .packaged import efficientnet_lite0_classifier as efficientnet_lite0_classifier
from .packaged import efficientnet_lite0_weights as efficientnet_lite0_weights
from .packaged import minilm_classifier as minilm_classifier
from .packaged import minilm_dir as minilm_dir
from .packaged import package_file as package_file
from .packaged import tweets_csv as tweets_csv
