#!/usr/bin/env bash
# Lays out everything a GPU session carries, here on the dev machine, from the repository root:
#
#   bash benchmarks/gpu_session/prepare.sh             # core calls 1-5 plus the DALI/Ray parts
#   bash benchmarks/gpu_session/prepare.sh --core      # core calls only (no DALI, no Ray)
#
# The lent GPU machine is offline and has python3.12 + torch but not vfm, av, PyNvVideoCodec,
# diffusers, DALI or Ray (../shared/GPU.md). Each device call may carry at most 64 MiB (working tree
# included), so the wheels are laid out in one git-ignored folder per call under .gpu_session/:
#
#   call1/  vfm wheels, diffusers, importlib_metadata, av        (tests, attention)
#   call2/  vfm wheels, pynvvideocodec [+ a Ray part]          (decoders, curator; av from call1)
#   call3/  vfm wheels, diffusers, importlib_metadata [+ a DALI part]   (training)
#   call4/  vfm wheels, diffusers, importlib_metadata [+ a DALI part]   (generation 8k, vfm plan)
#   call5/  vfm wheels, diffusers, importlib_metadata [+ a DALI part]   (32k: generation, training)
#   x1..xN/ one part each of the rest of the DALI and Ray bundles (tars split into 50 MiB parts)
#
# benchmarks/gpu_session/run.sh runs there and README.md beside it lists the device calls.
# Every external wheel is fetched by exact version from the package registry, for CPython 3.12
# manylinux x86-64, without dependencies (each dependency the GPU machine lacks is named here).
set -euo pipefail

CORE_ONLY=0
for arg in "$@"; do
    case "$arg" in
        --core) CORE_ONLY=1 ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "prepare.sh: unknown option '$arg'; accepted: --core, --help" >&2; exit 2 ;;
    esac
done
if [[ ! -d packages || ! -f hatch.toml ]]; then
    echo "prepare.sh: run it from the repository root (where hatch.toml and packages/ are)" >&2
    exit 2
fi

# Exact versions. av matches the dev environment's PyAV (the decoder tolerances were measured with
# it); diffusers is the peer the GPU figures in docs/gpu.md were taken against.
PEER=(diffusers==0.42.1 importlib_metadata==10.2.0)   # diffusers' other needs are on the machine
AV=(av==18.1.0)
NVC=(pynvvideocodec==2.2.4)
DALI=(nvidia-dali-cuda130==2.4.0 astunparse==1.6.3 gast==0.7.0 optree==0.20.0 nvtx==0.2.17 makefun==1.16.0
      libcst==1.9.0 nvidia-nvimgcodec-cu13==0.9.0.20 nvidia-libnvcomp-cu13==5.3.0.16)
RAY=(ray==2.60.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1)

ROOT=.gpu_session
STAGE=$ROOT/stage
PART_MAX=$((50 * 1024 * 1024))   # 52.4 MB, less where calls 3-5 and the working tree leave less room
LIMIT=$((64 * 1024 * 1024))
MARGIN=$((3 * 1024 * 1024))   # room left for the working tree to grow before the session

tree_bytes() {  # what travels besides the carry: tracked files and untracked ones git does not ignore
    git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

git check-ignore -q "$ROOT/call1" || { echo "prepare.sh: $ROOT/ is not git-ignored; add '$ROOT/' to .gitignore first" >&2; exit 2; }
rm -rf "$ROOT" && mkdir -p "$STAGE"/{vfm,peer,av,nvc,dali,ray}

PIP=(hatch run python -m pip)
PLATFORMS=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_34_x86_64)
SKIPPED=()

download() {  # download DEST SPEC...: one pip call per wheel, so that a missing one skips only itself
    local dest=$1; shift
    local spec
    for spec in "$@"; do
        if ! "${PIP[@]}" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
                "${PLATFORMS[@]}" -d "$dest" "$spec" 2>"$STAGE/pip.err"; then
            echo "SKIPPED: $spec is not in the package registry for CPython 3.12 manylinux x86-64:" >&2
            grep -v "is ignored" "$STAGE/pip.err" | tail -2 >&2 || true
            SKIPPED+=("$spec")
        fi
    done
}

echo "building the vfm wheels"
for p in packages/*/; do
    "${PIP[@]}" wheel -q --no-deps --no-build-isolation -w "$STAGE/vfm" "$p"
done
echo "downloading: ${PEER[*]} ${AV[*]} ${NVC[*]}"
download "$STAGE/peer" "${PEER[@]}"
download "$STAGE/av" "${AV[@]}"
download "$STAGE/nvc" "${NVC[@]}"

link() {  # link DEST SRC_DIR...: hard links (no extra disk), copies where links fail
    local dest=$1; shift
    mkdir -p "$dest"
    local dir
    for dir in "$@"; do
        [[ -n "$(ls -A "$dir")" ]] && { cp -l "$dir"/* "$dest"/ 2>/dev/null || cp "$dir"/* "$dest"/; }
    done
    return 0
}

link "$ROOT/call1" "$STAGE/vfm" "$STAGE/peer" "$STAGE/av"
link "$ROOT/call2" "$STAGE/vfm" "$STAGE/nvc"
link "$ROOT/call3" "$STAGE/vfm" "$STAGE/peer"
link "$ROOT/call4" "$STAGE/vfm" "$STAGE/peer"
link "$ROOT/call5" "$STAGE/vfm" "$STAGE/peer"

if [[ $CORE_ONLY == 0 ]]; then
    echo "downloading: ${DALI[*]} ${RAY[*]}"
    download "$STAGE/dali" "${DALI[@]}"
    download "$STAGE/ray" "${RAY[@]}"
    # One part must fit beside calls 3-5's wheels and the working tree with the margin (that is what
    # keeps the layout README.md lists: a fixed 50 MiB stopped fitting once the tree passed 4.3 MB,
    # and every DALI part then took a call of its own).
    room=$((LIMIT - MARGIN - $(tree_bytes) - $(du -sb "$ROOT/call3" | cut -f1)))
    part_bytes=$((room < PART_MAX ? room : PART_MAX))
    if (( part_bytes < 30 * 1024 * 1024 )); then   # split -a 1 names ten parts at most
        echo "prepare.sh: calls 3-5 leave $((room / 1048576)) MiB for a bundle part (working tree $(($(tree_bytes) / 1048576)) MiB); shrink the tree or split the bundles another way" >&2
        exit 1
    fi
    # one bundle each (a tar of wheels), split into parts; run.sh there cats them back together
    bundles=()
    for name in dali ray; do
        if [[ -z "$(ls -A "$STAGE/$name")" ]]; then
            echo "SKIPPED: the $name bundle (no wheels downloaded)" >&2
            continue
        fi
        tar -C "$STAGE/$name" -cf "$STAGE/$name.tar" .
        (cd "$STAGE" && sha256sum "$name.tar" > "$name.tar.sha256" && split -b "$part_bytes" -d -a 1 "$name.tar" "$name.tar.part")
        rm "$STAGE/$name.tar"
        bundles+=("$name")
    done
    # Each part rides along with the first core call that has room for it (calls 3 to 5 carry
    # only 7 MB of wheels; call 2 can take Ray's small last part); the rest get one call each
    # (x1, x2, ...). run.sh gathers the parts in any order and installs a bundle once it is whole.
    tree=$(tree_bytes)
    n=0
    for name in "${bundles[@]}"; do
        nparts=$(ls "$STAGE/$name".tar.part* | wc -l | tr -d ' ')
        for f in "$STAGE/$name".tar.part*; do
            size=$(stat -c %s "$f")
            dest=""
            for call in "$ROOT"/call1 "$ROOT"/call2 "$ROOT"/call3 "$ROOT"/call4 "$ROOT"/call5; do
                if (( $(du -sb "$call" | cut -f1) + size + tree + MARGIN <= LIMIT )); then dest=$call; break; fi
            done
            if [[ -z $dest ]]; then n=$((n + 1)); dest=$ROOT/x$n; fi
            mkdir -p "$dest"
            cp -l "$f" "$dest/" 2>/dev/null || cp "$f" "$dest/"
            cp "$STAGE/$name.tar.sha256" "$dest/"
            echo "$nparts" > "$dest/$name.tar.nparts"   # so that run.sh knows when the bundle is whole
        done
    done
fi

tree=$(tree_bytes)
echo
printf '%-22s %10s %12s  %s\n' "carry" "MB" "+ tree, MiB" "contents"
status=0
for dir in "$ROOT"/call* "$ROOT"/x*; do
    [[ -d "$dir" ]] || continue
    bytes=$(du -sb "$dir" | cut -f1)
    total=$((bytes + tree))
    flag=""
    if (( total > LIMIT )); then flag="  OVER THE 64 MiB LIMIT"; status=1; fi
    printf '%-22s %10.1f %12.1f  %s%s\n' "$dir" "$(echo "$bytes / 1000000" | bc -l)" "$(echo "$total / 1048576" | bc -l)" \
        "$(ls "$dir" | sed -E 's/-py[23].*|-cp3.*|\.whl$//' | tr '\n' ' ')" "$flag"
done
printf 'working tree: %.1f MB\n' "$(echo "$tree / 1000000" | bc -l)"
if (( ${#SKIPPED[@]} )); then
    echo "not in the registry, left out (run.sh says what that skips): ${SKIPPED[*]}"
fi
exit $status
