"""``python -m vfm_cli ...``: the ``vfm`` command, for environments whose scripts folder is not on PATH."""

from vfm_cli.main import main

if __name__ == "__main__":
    main()
