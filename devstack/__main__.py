import sys

from pipelines.cli.app import main

sys.exit(main(["devstack", *sys.argv[1:]]))
