"""``python -m tribal_memory``: the same as the ``tribal-memory`` command."""

from tribal_memory.interfaces.cli import main

if __name__ == "__main__":
    main()
