# Source on the offline GPU machine, in the repository root, with the wheel folder(s) carried along
# (see ../shared/GPU.md): installs their wheels under /tmp/site and puts the working tree's package
# sources first on the path, so a run uses the code as it is in this checkout.
#   . benchmarks/gpu_env.sh                       # the wheels in .whl/
#   . benchmarks/gpu_env.sh .gpu_session/call1    # one of prepare.sh's folders (see gpu_session/README.md)
# benchmarks/gpu_session/run.sh does the same for each step of a GPU session.
_vfm_wheels=()
for _d in "${@:-.whl}"; do
    for _w in "$_d"/*.whl; do [ -f "$_w" ] && _vfm_wheels+=("$_w"); done
done
if [ ${#_vfm_wheels[@]} -gt 0 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${_vfm_wheels[@]}" || return 1
else
    echo "gpu_env.sh: no wheels in ${*:-.whl}; using what /tmp/site holds" >&2
fi
src=$(for p in packages/*/src; do printf '%s:' "$PWD/$p"; done)
export PYTHONPATH="${src}/tmp/site" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
unset _vfm_wheels _d _w
