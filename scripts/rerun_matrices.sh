#!/usr/bin/env bash
# Regenerate the compatibility reports whole, at the current commit, in this environment:
#
#   Transformers causal-LM architectures, eager and compiled  ->  docs/reports/compat-transformers.md
#   Diffusers pipelines, eager and compiled                   ->  docs/reports/compat-diffusers.md
#
#   bash scripts/rerun_matrices.sh                # all four runs (hours on a 2-core machine); run it again to resume
#   bash scripts/rerun_matrices.sh --arch llama gpt2 --pipeline DDIMPipeline --into /tmp/reports   # a small run
#
# Options:
#   --jobs N        workers at a time (default 2)
#   --nice N        niceness of the runs (default 10)
#   --scratch DIR   where the four runs keep their results, one directory per commit (default
#                   ~/.cache/torchneuron/rerun-matrices): an interrupted run resumes from it
#   --into DIR      where the two reports are written (default docs/reports)
#   --arch NAME...  only these architectures; --pipeline NAME...: only these pipelines (a partial report)
#   --only SUITE    transformers or diffusers
#
# Every run is at one commit: the script refuses a checkout with uncommitted changes under csrc/ or
# torch_neuronx/, rebuilds the extension if a source is newer than it (scripts/build.sh), and keeps each
# commit's runs apart, so a resumed run never mixes rows of two commits. The runs use a private core registry (cores held by other jobs on the
# host do not matter) and the report headers record the commit, dates, versions and wall time of each run.
# Exit status: 0 the reports were written (they may count failures: that is what they are for), 2 bad usage or
# a modified checkout, anything else a run that could not be completed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
py=${PYTHON:-$root/.venv/bin/python}
jobs=2 niceness=10 scratch=${XDG_CACHE_HOME:-$HOME/.cache}/torchneuron/rerun-matrices into=docs/reports only=""
archs=() pipelines=()
while [ $# -gt 0 ]; do
    case "$1" in
        --jobs) jobs=$2; shift 2 ;;
        --nice) niceness=$2; shift 2 ;;
        --scratch) scratch=$2; shift 2 ;;
        --into) into=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --arch|--pipeline)
            list=$1; shift
            while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do
                if [ "$list" = --arch ]; then archs+=("$1"); else pipelines+=("$1"); fi
                shift
            done ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "rerun_matrices.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$only" in ""|transformers|diffusers) ;; *) echo "rerun_matrices.sh: --only transformers|diffusers" >&2; exit 2 ;; esac

if [ -n "$(git status --porcelain -- csrc torch_neuronx)" ]; then
    echo "rerun_matrices.sh: uncommitted changes under csrc/ or torch_neuronx/; a report must describe a commit." >&2
    echo "Commit (or stash) them first:" >&2
    git status --short -- csrc torch_neuronx >&2
    exit 2
fi
commit=$(git rev-parse HEAD)
# The extension of this commit: rebuilt when a source is newer than it (scripts/build.sh waits for the machine's
# build lock, so it is not taken when nothing changed).
so=$(ls torch_neuronx/_C*.so 2>/dev/null | head -1 || true)
if [ -z "$so" ] || [ -n "$(find csrc setup.py -newer "$so" -print -quit)" ]; then
    bash scripts/build.sh >/dev/null
fi

work=$scratch/$commit
mkdir -p "$work" "$into"
export TORCHNEURON_CORE_REGISTRY=$work/core-registry
mkdir -p "$TORCHNEURON_CORE_REGISTRY"
echo "commit $commit; runs in $work; reports into $into"

compat() {  # exit 1 (failures on neuron) still wrote a report
    local code=0
    nice -n "$niceness" "$py" -m torch_neuronx.cli compat "$@" || code=$?
    [ "$code" -le 1 ] || { echo "rerun_matrices.sh: torchneuron compat $* ended with exit code $code" >&2; exit "$code"; }
}

run_suite() {  # suite, report name, item option, items..., then timeouts of eager and compiled
    local suite=$1 name=$2 option=$3; shift 3
    local items=("${@:1:$#-2}") eager_timeout=${*: -2:1} compiled_timeout=${*: -1}
    local select=(--suite "$suite")
    [ ${#items[@]} -gt 0 ] && select+=("$option" "${items[@]}")
    SECONDS=0
    compat "${select[@]}" --mode eager --jobs "$jobs" --timeout "$eager_timeout" --resume --out "$work/$suite-eager"
    compat "${select[@]}" --mode compiled --jobs "$jobs" --timeout "$compiled_timeout" --resume \
        --out "$work/$suite-compiled"
    compat --combine "$work/$suite-eager" "$work/$suite-compiled" --out "$work/$suite"
    cp "$work/$suite/compat.md" "$into/$name"
    echo "$into/$name written ($suite: $((SECONDS / 60)) min in this session; full results: $work/$suite/compat.json)"
}

if [ "$only" != diffusers ]; then
    run_suite transformers compat-transformers.md --arch ${archs[@]+"${archs[@]}"} 900 1800
fi
if [ "$only" != transformers ]; then
    if ! "$py" -c "import sentencepiece, cv2, librosa, note_seq" 2>/dev/null; then
        echo "note: the diffusers-matrix extra is not installed: 6 pipeline classes will read \"needs package\"" \
             "(pip install -e .[diffusers-matrix] for the whole matrix)"
    fi
    run_suite diffusers compat-diffusers.md --pipeline ${pipelines[@]+"${pipelines[@]}"} 900 1800
fi
echo "done: commit the reports in $into with the commit they describe ($commit) as their parent."
