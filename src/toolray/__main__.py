"""``python -m toolray``: the command line lives in the Ray layer (``toolray_actors.cli``)."""

from __future__ import annotations

import sys


def main() -> int:
    """Run the ``toolray`` command line, or explain in one line why it cannot run."""
    try:
        from toolray_actors.cli import main as cli_main
    except ImportError as err:
        missing = getattr(err, "name", None) or str(err)
        print(
            f"toolray: the command line needs Ray ({missing} is not installed); "
            'install it with: pip install "toolray[ray]"',
            file=sys.stderr,
        )
        return 2
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
