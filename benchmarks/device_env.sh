# Sourced by the device scripts: install the carried wheels (.whl/, see ../../shared/DESIGN.md)
# into /tmp/site once, and put them and this checkout on PYTHONPATH.
_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ ! -d /tmp/site/optuna ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$_root"/.whl/*.whl || return 1
fi
export PYTHONPATH=/tmp/site:$_root PYTHONUNBUFFERED=1
