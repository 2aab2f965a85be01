"""Stand-in for the pip bootstrap script that ansible-test downloads from the internet.

ansible-test creates an empty virtual environment for each sanity test and runs this file
(saved as ~/.ansible/test/cache/get_pip_<version>.py) with pip's install options, as it
would run get-pip.py. Hosts that reach only the package index cannot download get-pip.py,
so this bootstraps pip with the interpreter's own ensurepip and installs the requested
packages (the pinned pip, setuptools, wheel) from the index.
"""
import subprocess
import sys

BOOTSTRAP_ONLY_FLAGS = {"--no-setuptools", "--no-wheel"}

subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
packages = [arg for arg in sys.argv[1:] if arg not in BOOTSTRAP_ONLY_FLAGS]
subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet"] + packages)
