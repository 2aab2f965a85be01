# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names NVIDIA uses for its CUDA apt repository paths and driver packages.

Pure functions: facts and a branch in, names out. They raise
NvidiaPackagesError on input NVIDIA publishes nothing for, so a role can stop
before it touches the host.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re


class NvidiaPackagesError(ValueError):
    """Raised when NVIDIA publishes no repository or packages for the input."""


# distribution -> versions NVIDIA's CUDA repository serves for it.
SUPPORTED_RELEASES = {
    'Ubuntu': ('22.04', '24.04'),
    'Debian': ('12',),
}

# Kernel architecture -> NVIDIA's repository architecture. Arm servers are
# "sbsa" (Server Base System Architecture), not "aarch64" or "arm64".
REPO_ARCHITECTURES = {
    'x86_64': 'x86_64',
    'aarch64': 'sbsa',
}

# From branch 590 on, NVIDIA's Ubuntu packages drop the branch suffix and the
# branch is locked only through nvidia-driver-pinning-<branch>.
UBUNTU_UNSUFFIXED_FROM_BRANCH = 590

PERSISTENCED_SERVICE = 'nvidia-persistenced'


def _release_key(distribution, version):
    if distribution == 'Debian':
        # Debian reports point releases ("12.8"); the repository is per major release.
        return version.split('.')[0]
    return version


def cuda_repo_path(distribution, version, architecture):
    """Return the repository path below .../compute/cuda/repos/, e.g. ``ubuntu2404/x86_64``."""
    distribution = str(distribution)
    version = str(version)
    architecture = str(architecture)
    releases = SUPPORTED_RELEASES.get(distribution)
    if releases is None:
        raise NvidiaPackagesError(
            'NVIDIA CUDA repository: unsupported distribution %r; supported: %s'
            % (distribution, ', '.join(
                '%s %s' % (name, ' / '.join(vers)) for name, vers in sorted(SUPPORTED_RELEASES.items()))))
    release = _release_key(distribution, version)
    if release not in releases:
        raise NvidiaPackagesError(
            'NVIDIA CUDA repository: %s %s is not supported; supported %s releases: %s'
            % (distribution, version, distribution, ', '.join(releases)))
    repo_arch = REPO_ARCHITECTURES.get(architecture)
    if repo_arch is None:
        raise NvidiaPackagesError(
            'NVIDIA CUDA repository: unsupported architecture %r; supported: %s'
            % (architecture, ', '.join(sorted(REPO_ARCHITECTURES))))
    return '%s%s/%s' % (distribution.lower(), release.replace('.', ''), repo_arch)


def _branch_number(branch):
    text = str(branch).strip()
    if not re.match(r'^[0-9]{3}$', text):
        raise NvidiaPackagesError(
            'NVIDIA driver branch must be a three digit branch number such as "580", got %r' % (branch,))
    return int(text)


def driver_packages(branch, distribution):
    """Return the packages that install and lock a headless open-module driver of ``branch``.

    Keys: ``pinning`` (package that locks apt onto the branch), ``driver`` (packages
    to install and hold, kernel module source first), ``persistenced_service``.
    """
    number = _branch_number(branch)
    distribution = str(distribution)
    if distribution == 'Debian':
        # NVIDIA's Debian packages never carry the branch in their name.
        driver = ['nvidia-kernel-open-dkms', 'nvidia-driver-cuda', 'nvidia-persistenced']
    elif distribution == 'Ubuntu':
        suffix = '' if number >= UBUNTU_UNSUFFIXED_FROM_BRANCH else '-%d' % number
        driver = [
            'nvidia-dkms%s-open' % suffix,
            'libnvidia-compute%s' % suffix,
            'nvidia-utils%s' % suffix,
            # nvidia-persistenced ships in nvidia-compute-utils on Ubuntu.
            'nvidia-compute-utils%s' % suffix,
        ]
    else:
        raise NvidiaPackagesError(
            'NVIDIA driver packages: unsupported distribution %r; supported: Debian, Ubuntu' % (distribution,))
    return {
        'pinning': 'nvidia-driver-pinning-%d' % number,
        'driver': driver,
        'persistenced_service': PERSISTENCED_SERVICE,
    }
