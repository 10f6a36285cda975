"""Reading files that may come from someone else: recipes, checkpoints, exports.

**Threat model.** A recipe, a checkpoint (``.ckpt``, ``.safetensors``) or an export directory
may be downloaded from anywhere; the person running the command trusts this package and the
libraries it depends on, not those files. Reading such a file must not

* run code: no pickle (every ``torch.load`` uses ``weights_only=True``, exports are
  safetensors and JSON), and no import of a class the file names unless an explicit list allows
  it (:mod:`.allowlist`, whose models are recorded in :mod:`.model_registry`; an export's model
  block is checked by :mod:`.export_spec`), checked *before* jsonargparse imports anything and
  again on what it parsed; a class path is any dotted name jsonargparse would import
  (:func:`.allowlist.is_class_path`), and every file the export command's parser reads is read
  and checked as it reads it (:mod:`.parser_reads`). A checkpoint's and an export's class blocks
  are built by one function,
  :func:`.class_blocks.build_class_block`, which also types every argument as a recipe's (a
  routine's, by :func:`.routine_checkpoints.load_routine`);
* fetch: an export is self-contained (no weights from the hub, a cache or a path);
* escape its folder or read a special file (a FIFO, a device): inputs are opened as regular
  files, and file names given in a configuration stay in their folder (:mod:`.files`);
* exhaust memory or time: sizes, nesting depth, YAML aliases (cyclic ones refused), regex
  repeats (atomic groups and possessive repeats walked too) and a model's layer counts
  (:func:`.export_spec.check_layer_counts`) are bounded before use, and a
  checkpoint's tensors are checked whole and finite (:mod:`.checkpoints`);
* choose what a run reads or builds: the saved arguments ``--ckpt_path`` takes where a recipe
  leaves one unset never fetch or read files, hold only finite numbers and allowed classes, and
  no pattern that could match for ever (:mod:`.checkpoint_args`);
* leave a half-written file behind when a run is cut off: outputs are written whole or not at
  all (:mod:`.atomic_files`; Lightning's checkpoints through :mod:`.checkpoint_io`);
* touch another run's files: a run's folder is held by one process at a time
  (:mod:`.run_lock`).

Saved hyper-parameters and exported configurations hold data only (:mod:`.plain_data`). Files
written by earlier versions keep loading: a class path that moved is read as its current one
(:data:`.allowlist.MOVED_CLASS_PATHS`).

Nothing is imported here, so that reading one module of this package stays cheap.
"""
