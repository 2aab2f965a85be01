# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated ``sglang`` console script (sglang.cli.main:main of the wheel's entry_points.txt).

`serve` starts the simulated server with the arguments that follow, as `sglang serve` starts
SGLang's; `version` prints the installed release. Both releases have the subcommand; 0.5.9's
finds the model only as `--model-path` (cli/utils.py get_model_path), 0.5.23's as `--model` too.
"""

import argparse
import sys

from inferops_lab_sglang_sim import launch_server


def main():
    parser = argparse.ArgumentParser(prog="sglang")
    subparsers = parser.add_subparsers(dest="subcommand", required=True)
    subparsers.add_parser("serve", help="Launch the SGLang server.", add_help=False)
    subparsers.add_parser("version", help="Show the version information.")
    args, extra_argv = parser.parse_known_args()
    release = launch_server.installed_release()
    if args.subcommand == "version":
        print("sglang version: %s" % ".".join(str(part) for part in release))
        return 0
    names = ("--model-path", "--model") if release >= (0, 5, 23) else ("--model-path",)
    if not any(arg in names or arg.startswith(tuple(name + "=" for name in names)) for arg in extra_argv):
        raise Exception("Usage: sglang serve --model-path <model-name-or-path> [additional-arguments]")
    launch_server.log("started as `sglang serve` (SGLang %s)" % ".".join(str(part) for part in release))
    return launch_server.main(extra_argv)


if __name__ == "__main__":
    sys.exit(main())
