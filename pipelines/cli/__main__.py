from pipelines.cli.main import entry

entry()
