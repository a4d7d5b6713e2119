"""Music tags of the embedded profile: instrument, genre, mood (and vocals) per 2 s window and per clip.

Heads trained on musicnn's MTT and MSD features (experts/learned/musicnn.py, numpy) with labels from rendered
General MIDI music and metadata-labelled recordings (`training/train_music_tags.py`, training/MUSIC_TAGS.md);
each tag's probability is calibrated on a held-out split, and the tag file `music_tags.json` says which tags
are precise enough for the evidence. Weights and tag file are package data; nothing is downloaded.
"""

from __future__ import annotations

from earmark.experts.learned.musictags.model import TAG_FILE, WEIGHTS, load_tag_file, tag_clip, weights_id

__all__ = ["TAG_FILE", "WEIGHTS", "load_tag_file", "tag_clip", "weights_id"]
