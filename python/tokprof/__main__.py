"""``python -m tokprof ...``: the tokprof CLI (the same binary as the ``tokprof`` command)."""
from ._cli import main

if __name__ == "__main__":
    main()
