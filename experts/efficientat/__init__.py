"""EfficientAT mn04_as, an AudioSet tagger (MIT): earmark's port of the network (`model.py`, which imports
torch) and the authors' weights, vendored with their sha256 (PROVENANCE.md)."""

from pathlib import Path

HERE = Path(__file__).resolve().parent
WEIGHTS = HERE / "mn04_as_mAP_432.pt"
LABELS_CSV = HERE / "class_labels_indices.csv"
WEIGHTS_SHA256 = "899a8c6217063f6941793102a2780b3dd788ab11fce468d9cf5f0577c453321c"
LABELS_SHA256 = "cdd1049833c4b86127c2773ac0d14a2754b6a6d0d1798002ed5c66e699708429"
SOURCE = "https://github.com/fschmid56/EfficientAT/releases/download/v0.0.1/mn04_as_mAP_432.pt"
LABEL_SET = "audioset-efficientat-mn04"  # logit i is class i of class_labels_indices.csv
