#!/usr/bin/env bash
# Makes DIR a Python venv with prometheus_client (PyPI), whose exposition-format parser the live
# tests hand `tokprof serve`'s scrapes to. Kept between runs: only a missing or broken venv is
# (re)made. usage: prom_venv.sh DIR
set -euo pipefail
dir=$1
if "$dir/bin/python" -c 'import prometheus_client.parser' 2>/dev/null; then
    exit 0
fi
rm -rf "$dir"
python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check 'prometheus_client==0.26.0'
"$dir/bin/python" -c 'import prometheus_client.parser'
