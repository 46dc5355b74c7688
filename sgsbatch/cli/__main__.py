"""`python -m sgsbatch.cli`: the `sgsbatch` command."""

from sgsbatch.cli.commands import main

if __name__ == "__main__":
    main()
