from pipelines.cli.app import entry

entry()
