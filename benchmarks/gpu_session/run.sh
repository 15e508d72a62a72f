#!/usr/bin/env bash
# One device call of a GPU session (README.md beside this file lists the calls in order):
#
#   bash benchmarks/gpu_session/run.sh STEP       # on the lent GPU machine, from the repository root
#
# STEP  carry                  what it runs (each part under its own time limit)
#   1   .gpu_session/call1     install; pytest -m gpu tests/gpu and the hot-path sync tests of tests/parallel;
#                              benchmarks/gpu_attention.py
#   2   .gpu_session/call2     decode-only frames/s per backend; pytest -m gpu tests/curator/test_decoders.py;
#                              benchmarks/curator_gpu.py (CPU-only vs GPU stages)       [needs av from step 1]
#   3   .gpu_session/call3     benchmarks/gpu_train.py at 8k: eager, compile, compile+ac, packed, vfm and peer
#   4   .gpu_session/call4     gpu_generate.py 8k; vfm plan --calibrate; one-GPU layouts predicted vs measured
#   5   .gpu_session/call5     gpu_generate.py 32k; gpu_train.py 32k compile+ac (vfm and peer)
#   part .gpu_session/xN       keeps a DALI/Ray part under /tmp; installs a bundle once it is whole
#   extras .gpu_session/xN     keeps its part, installs every whole bundle (DALI, Ray), runs the DALI
#                              decoder tests and decode speeds, the curator with --runner ray
#
# Logs and figures go to $OUT (the device tool brings them back): stepN.log and JSON/XML files.
# Wheels are installed under /tmp/site and parts kept under /tmp/gpu_session: both survive from one
# call to the next while the machine stays warm (about 30 s idle), not longer. A step installs the
# wheels it carries itself; what it needs from an earlier call it checks and names when missing.
#
# Here, without a GPU: VFM_GPU_SESSION_SMOKE=1 PYTHON=python bash benchmarks/gpu_session/run.sh STEP
# runs the same step at toy size on the CPU (every benchmark's --smoke; pytest -m gpu collects and
# skips), installing nothing: a check of this script before device time is spent.
set -uo pipefail

STEP=${1:-}
case "$STEP" in
    1|2|3|4|5|part|extras) ;;
    *) echo "usage: bash benchmarks/gpu_session/run.sh STEP   (STEP: 1, 2, 3, 4, 5, part, extras; see the header)" >&2
       exit 2 ;;
esac
cd "$(dirname "$0")/../.." || exit 2

PY=${PYTHON:-python3}
SMOKE=${VFM_GPU_SESSION_SMOKE:-0}
OUT=${OUT:-/tmp/gpu_session_out}
STATE=${VFM_GPU_STATE:-/tmp/gpu_session}
SITE=${VFM_GPU_SITE:-/tmp/site}
BUDGET=${VFM_STEP_BUDGET:-540}     # seconds this step may take in all (the device call's limit is 600)
mkdir -p "$OUT" "$STATE/parts" "$STATE/installed" "$SITE"
LOG="$OUT/step$STEP.log"
RESULTS=()
SMOKE_FLAG=()
[[ $SMOKE == 1 ]] && SMOKE_FLAG=(--smoke)

# no network there: libraries that would try the Hugging Face hub must not wait for it
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
if [[ $SMOKE != 1 ]]; then
    src=$(for p in "$PWD"/packages/*/src; do printf '%s:' "$p"; done)
    export PYTHONPATH="${src}${SITE}"   # this checkout's sources first, the installed wheels' metadata after
fi

task() {  # task NAME LIMIT_S MIN_S CMD...: run CMD under a time limit within what is left of BUDGET
    local name=$1 limit=$2 min=$3
    shift 3
    local left=$((BUDGET - SECONDS - 5))
    if (( left < min )); then
        echo "=== $name: SKIPPED (${left}s left of this step's ${BUDGET}s; it needs at least ${min}s)"
        RESULTS+=("$(printf '%-16s %-30s' "$name" "skipped: no time left")")
        return 0
    fi
    (( limit > left )) && limit=$left
    echo
    echo "=== $name (limit ${limit}s, $(date +%T)): $*"
    local t0=$SECONDS rc verdict
    timeout -k 15 "$limit" "$@"
    rc=$?
    case $rc in
        0) verdict="ok" ;;
        124|137) verdict="TIMED OUT at ${limit}s" ;;
        *) verdict="FAILED (exit $rc)" ;;
    esac
    echo "=== $name: $verdict after $((SECONDS - t0))s"
    RESULTS+=("$(printf '%-16s %-30s %5ss' "$name" "$verdict" "$((SECONDS - t0))")")
}

keep_parts() {  # the DALI/Ray parts this call carried go to $STATE/parts (they outlive the call)
    local f n=0
    for f in .gpu_session/*/*.tar.part* .gpu_session/*/*.tar.sha256 .gpu_session/*/*.tar.nparts; do
        [[ -f $f ]] || continue
        cp "$f" "$STATE/parts/" && n=$((n + 1))
    done
    (( n )) && echo "kept $n part file(s) under $STATE/parts"
    bundle_status
}

bundle_status() {  # which parts of each bundle are here, and which are missing
    local np name want i missing have
    for np in "$STATE"/parts/*.tar.nparts; do
        [[ -f $np ]] || continue
        name=$(basename "$np" .tar.nparts)
        want=$(cat "$np")
        if [[ -f $STATE/installed/$name.bundle ]]; then echo "bundle $name: installed"; continue; fi
        missing=()
        for ((i = 0; i < want; i++)); do [[ -f $STATE/parts/$name.tar.part$i ]] || missing+=("part$i"); done
        have=$((want - ${#missing[@]}))
        if (( ${#missing[@]} )); then
            echo "bundle $name: $have of $want parts here; missing ${missing[*]} (see README.md for the call carrying each)"
        else
            echo "bundle $name: all $want parts here"
        fi
    done
}

install_wheels() {  # pip-installs the carried wheels not installed by an earlier call of this machine
    local f todo=()
    for f in .gpu_session/*/*.whl; do
        [[ -f $f && ! -f $STATE/installed/$(basename "$f") ]] && todo+=("$f")
    done
    (( ${#todo[@]} )) || { echo "wheels: nothing new to install"; return 0; }
    echo "installing ${#todo[@]} wheel(s) under $SITE: $(for f in "${todo[@]}"; do basename "$f" | sed -E 's/-(py|cp)3.*//'; done | tr '\n' ' ')"
    if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "${todo[@]}"; then
        for f in "${todo[@]}"; do touch "$STATE/installed/$(basename "$f")"; done
    else
        echo "wheels: pip install failed (see above)"
        return 1
    fi
}

install_bundles() {  # every bundle whose parts are all here: cat, check, unpack, install
    local np name want i parts
    for np in "$STATE"/parts/*.tar.nparts; do
        [[ -f $np ]] || continue
        name=$(basename "$np" .tar.nparts)
        want=$(cat "$np")
        [[ -f $STATE/installed/$name.bundle ]] && continue
        parts=()
        for ((i = 0; i < want; i++)); do parts+=("$STATE/parts/$name.tar.part$i"); done
        if ! ls "${parts[@]}" >/dev/null 2>&1; then continue; fi
        cat "${parts[@]}" > "$STATE/$name.tar"
        cp "$STATE/parts/$name.tar.sha256" "$STATE/"
        if ! (cd "$STATE" && sha256sum -c --quiet "$name.tar.sha256"); then
            echo "bundle $name: the checksum does not match (a part from another prepare.sh run?): not installed"
            rm -f "$STATE/$name.tar"
            continue
        fi
        rm -rf "$STATE/bundle-$name" && mkdir -p "$STATE/bundle-$name"
        tar -C "$STATE/bundle-$name" -xf "$STATE/$name.tar" && rm -f "$STATE/$name.tar" "${parts[@]}"
        echo "bundle $name: installing $(ls "$STATE/bundle-$name" | sed -E 's/-(py|cp)3.*//' | tr '\n' ' ')"
        if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
                "$STATE/bundle-$name"/*.whl; then
            touch "$STATE/installed/$name.bundle"
            rm -rf "$STATE/bundle-$name"
        else
            echo "bundle $name: pip install failed"
        fi
    done
}

importable() { "$PY" -c "import $1" >/dev/null 2>&1; }

facts() {  # the machine and which packages are there, once per call
    echo "--- $(date -u +'%F %T') UTC, step $STEP, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$PY" - <<'EOF'
import importlib.metadata as md, importlib.util, sys
try:
    import torch
    cuda = torch.cuda.is_available()
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_name() if cuda else 'no CUDA device'}, cuDNN {torch.backends.cudnn.version()}")
except ImportError as exc:
    print(f"python {sys.version.split()[0]}, torch: {exc}")
found = []  # found, not imported: importing ray or DALI takes seconds
for mod, dist in (("vfm_cli", "vfm-cli"), ("vfm_curator", "vfm-curator"), ("diffusers", "diffusers"),
                  ("transformers", "transformers"), ("av", "av"), ("PyNvVideoCodec", "pynvvideocodec"),
                  ("nvidia.dali", "nvidia-dali-cuda130"), ("ray", "ray"), ("torchao", "torchao")):
    try:
        spec = importlib.util.find_spec(mod)
    except ImportError:
        spec = None
    if spec is None:
        found.append(f"{mod} -")
        continue
    try:
        found.append(f"{mod} {md.version(dist)}")
    except md.PackageNotFoundError:
        found.append(f"{mod} (no metadata)")
print("found: " + ", ".join(found))
EOF
}

installing() {  # smoke runs install nothing unless VFM_GPU_SESSION_INSTALL=1
    [[ $SMOKE != 1 || -n ${VFM_GPU_SESSION_INSTALL:-} ]] && return 0
    echo "smoke: nothing installed (this environment's packages are used)"
    return 1
}

prepare_call() {
    keep_parts
    if installing; then
        install_wheels
        install_bundles
    fi
    facts
}

need() {  # need MODULE WHY: stop this step with a clear message when MODULE cannot be imported
    importable "$1" && return 0
    echo "*** $1 cannot be imported: $2"
    echo "*** this step cannot run its remaining parts. Carry what it names (README.md) and call it again."
    RESULTS+=("$(printf '%-16s %-30s' "($1)" "missing: stopped")")
    return 1
}

summary() {
    echo
    echo "=== step $STEP summary ($((SECONDS))s of ${BUDGET}s):"
    local r
    for r in "${RESULTS[@]}"; do echo "  $r"; done
    echo "files in \$OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
}

step1() {
    prepare_call
    task pytest_gpu 330 60 "$PY" -m pytest -m gpu tests/gpu -q -rs -p no:cacheprovider -o timeout=150 --junitxml="$OUT/pytest_gpu.xml"
    # no host-device sync in a training step's batch copy, ring hops and grouped attention (sync debug mode)
    task pytest_syncs 60 30 "$PY" -m pytest -m gpu tests/parallel/test_batches_to_device.py tests/parallel/test_cp_ring_blocks.py \
        tests/parallel/test_cp_local_attention.py -q -rs -p no:cacheprovider -o timeout=50 --junitxml="$OUT/pytest_syncs.xml"
    task attention 100 30 "$PY" benchmarks/gpu_attention.py "${SMOKE_FLAG[@]}" --json "$OUT/attention.json"
}

step2() {
    prepare_call
    need av "PyAV comes with call 1 (.gpu_session/call1); this machine went cold since, or call 1 did not run" || return
    rm -rf "$STATE/decode" "$STATE/curator"   # a repeated call starts afresh (curate would resume)
    task decode_fps 120 40 "$PY" benchmarks/gpu_session/decode_fps.py "${SMOKE_FLAG[@]}" --seconds 12 --frames 256 \
        --workdir "$STATE/decode" --json "$OUT/decode_fps.json"
    task pytest_decoders 180 40 "$PY" -m pytest -m gpu tests/curator/test_decoders.py -q -rs -p no:cacheprovider -o timeout=150 \
        --junitxml="$OUT/pytest_decoders.xml"
    task curator_gpu 330 120 "$PY" benchmarks/curator_gpu.py "${SMOKE_FLAG[@]}" --videos 8 --seconds 12 \
        --workdir "$STATE/curator" --json "$OUT/curator_gpu.json"
}

step3() {
    prepare_call
    need diffusers "diffusers (the peer) comes with this call's folder (.gpu_session/call3)" || return
    task train_8k 500 200 "$PY" benchmarks/gpu_train.py "${SMOKE_FLAG[@]}" --tokens 8k --json "$OUT/train_8k.json"
}

step4() {
    prepare_call
    need diffusers "diffusers (the peer) comes with this call's folder (.gpu_session/call4)" || return
    task generate_8k 240 60 "$PY" benchmarks/gpu_generate.py "${SMOKE_FLAG[@]}" --tokens 8k --steps 20 \
        --json "$OUT/generate_8k.json"
    local base=h100 plan_args=(--measure 6 --steps 5 --layout-timeout 80)
    if [[ $SMOKE == 1 ]]; then
        base=cpu
        plan_args=(--measure 2 --steps 3 --layout-timeout 120 --set "model.options={hidden = 64, depth = 2, num_heads = 2, patch = [1, 2, 2]}"
                   --set "data.latent_shape=[4, 2, 8, 8]" --set data.num_samples=16)
    fi
    task calibrate 60 20 "$PY" -m vfm_cli.main plan --calibrate --gpu "$base" --profile-out "$OUT/$base-calibrated.toml"
    local profile="$OUT/$base-calibrated.toml"
    [[ -f $profile ]] || { echo "no calibrated profile: the plan uses the built-in '$base' profile"; profile=$base; }
    task plan_measure 240 60 "$PY" benchmarks/gpu_session/plan_measure.py benchmarks/gpu_session/plan-1gpu.toml \
        --gpu "$profile" --gpus 1 "${plan_args[@]}" --json "$OUT/plan_measure.json"
}

step5() {
    prepare_call
    need diffusers "diffusers (the peer) comes with this call's folder (.gpu_session/call5)" || return
    task generate_32k 300 90 "$PY" benchmarks/gpu_generate.py "${SMOKE_FLAG[@]}" --tokens 32k --steps 3 \
        --json "$OUT/generate_32k.json"
    task train_32k 240 120 "$PY" benchmarks/gpu_train.py "${SMOKE_FLAG[@]}" --tokens 32k --modes compile+ac \
        --json "$OUT/train_32k.json"
}

step_part() {  # no Python started: a few seconds; a bundle whose last part came is installed now
    keep_parts
    if installing; then install_bundles; fi
}

step_extras() {
    prepare_call
    need av "PyAV comes with call 1 (.gpu_session/call1)" || return
    # each bundle is measured once per machine: a later extras call (the next bundle's last part) skips it
    if [[ -f $STATE/measured.dali ]]; then
        echo "DALI: measured by an earlier extras call on this machine"
    elif importable nvidia.dali; then
        touch "$STATE/measured.dali"
        rm -rf "$STATE/decode"
        task pytest_dali 150 40 "$PY" -m pytest -m gpu tests/curator/test_decoders.py -k dali -q -rs -p no:cacheprovider -o timeout=150 \
            --junitxml="$OUT/pytest_dali.xml"
        task decode_fps 150 40 "$PY" benchmarks/gpu_session/decode_fps.py "${SMOKE_FLAG[@]}" --seconds 12 --frames 256 \
            --workdir "$STATE/decode" --json "$OUT/decode_fps_extras.json"
    else
        echo "nvidia.dali is not importable: its bundle is not whole (see the bundle lines above)"
    fi
    if [[ -f $STATE/measured.ray ]]; then
        echo "Ray: measured by an earlier extras call on this machine"
    elif importable ray; then
        touch "$STATE/measured.ray"
        rm -rf "$STATE/curator-ray"
        task curator_ray 300 120 "$PY" benchmarks/curator_gpu.py "${SMOKE_FLAG[@]}" --runner ray --videos 4 --seconds 8 \
            --workdir "$STATE/curator-ray" --json "$OUT/curator_gpu_ray.json"
    else
        echo "ray is not importable: its bundle is not whole (see the bundle lines above)"
    fi
}

main() {
    case "$STEP" in
        1) step1 ;; 2) step2 ;; 3) step3 ;; 4) step4 ;; 5) step5 ;; part) step_part ;; extras) step_extras ;;
    esac
    summary
}

main 2>&1 | tee -a "$LOG"
exit "${PIPESTATUS[0]}"
