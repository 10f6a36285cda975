# The public names: read by type checkers, and by ``lazy_loader.attach_stub`` in __init__.py,
# which imports each name's module on first use.
from .ckpt_path_args import EVALUATION_ONLY_ARGS as EVALUATION_ONLY_ARGS
from .command import TUSigmaNormCLI as TUSigmaNormCLI
from .command import cli_main as cli_main
from .command import main as main
from .forwarding import FORWARDED_DATA_ARGS as FORWARDED_DATA_ARGS
from .forwarding import forward_datamodule_args as forward_datamodule_args
from .interruption import SIGINT_EXIT_CODE as SIGINT_EXIT_CODE
from .interruption import SIGTERM_EXIT_CODE as SIGTERM_EXIT_CODE
from .interruption import RunInterrupted as RunInterrupted
from .interruption import resume_command as resume_command
from .run_folders import SaveRunConfig as SaveRunConfig
from .tu_recipes import SUBCOMMANDS as SUBCOMMANDS
from .tu_recipes import tu_format_args as tu_format_args
