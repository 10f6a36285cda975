"""What every folder of the package stands on: argument checks that name the value and what is
valid (:mod:`.checks`), and the one place other libraries' private names are reached
(:mod:`._compat`). Nothing here imports another folder of the package."""
