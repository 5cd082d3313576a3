"""The `rubric-engine` command: the Hydra app, argument parsing, the subcommand table, each command's side.

The top layer: may import every other package; nothing imports it. The only package that imports Hydra.
"""
