# Source on the offline GPU machine, in the repository root, with .whl/ carried along
# (see ../shared/GPU.md): installs the wheels in .whl/ under /tmp/site and puts the working
# tree's package sources first on the path, so a run uses the code as it is in this checkout.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
src=$(for p in packages/*/src; do printf '%s:' "$PWD/$p"; done)
export PYTHONPATH="${src}/tmp/site" PYTHONUNBUFFERED=1
