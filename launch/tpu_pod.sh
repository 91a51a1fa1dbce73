#!/usr/bin/env bash
# Runs one jaxsvr command on every worker of a Cloud TPU VM slice.
#
#   launch/tpu_pod.sh --name svr-v4 --zone us-central2-b [--accelerator v4-32] \
#       [--version tpu-ubuntu2204-base] [--project P] [--data DIR]... [--dry-run] \
#       -- --config=configs/epic_jpose.py --workdir=gs://BUCKET/runs/jpose \
#          --config.data.annotations=gs://BUCKET/epic100
#
# 1. creates the TPU VM slice NAME, or reuses it when it exists;
# 2. copies this checkout (git archive of HEAD) to every worker and installs it with
#    jax[tpu] and gcsfs (for gs:// data and workdirs) in ~/jaxsvr/.venv;
# 3. copies each --data DIR to the same path under ~/jaxsvr on every worker (data in a
#    gs:// bucket needs no copy: every worker reads it);
# 4. runs `python -m jaxsvr.main <arguments>` on all workers at once (--worker=all):
#    jaxsvr.runtime.distributed finds the slice's workers and joins them (config.distributed=auto).
#
# The workdir must be one every worker can see (a gs:// bucket) for checkpoints.
# --dry-run prints the commands, one per line, and runs none. Needs: gcloud, git.
set -euo pipefail

name="" zone="" accelerator="v4-32" version="tpu-ubuntu2204-base" project="" dry=0
data=()
usage() {
  sed -n '3,6p' "$0" >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --name) name="$2"; shift 2 ;;
    --zone) zone="$2"; shift 2 ;;
    --accelerator) accelerator="$2"; shift 2 ;;
    --version) version="$2"; shift 2 ;;
    --project) project="$2"; shift 2 ;;
    --data) data+=("$2"); shift 2 ;;
    --dry-run) dry=1; shift ;;
    --) shift; break ;;
    *) echo "error: unknown option $1" >&2; usage ;;
  esac
done
[[ -n "$name" && -n "$zone" ]] || { echo "error: give --name and --zone" >&2; usage; }
[[ $# -gt 0 ]] || { echo "error: give the jaxsvr.main arguments after --" >&2; usage; }

where=(--zone "$zone")
[[ -n "$project" ]] && where+=(--project "$project")

run() {  # prints the command with --dry-run, else runs it
  if [[ "$dry" -eq 1 ]]; then
    printf '%q ' "$@" | sed 's/ $//'
    printf '\n'
  else
    "$@"
  fi
}

tpu=(gcloud compute tpus tpu-vm)
if [[ "$dry" -eq 1 ]] || ! "${tpu[@]}" describe "$name" "${where[@]}" > /dev/null 2>&1; then
  run "${tpu[@]}" create "$name" "${where[@]}" --accelerator-type "$accelerator" \
    --version "$version"
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
archive="/tmp/jaxsvr-$name.tar.gz"
run git -C "$root" archive --format=tar.gz --prefix=jaxsvr/ -o "$archive" HEAD
run "${tpu[@]}" scp "$archive" "$name:jaxsvr.tar.gz" "${where[@]}" --worker=all
run "${tpu[@]}" ssh "$name" "${where[@]}" --worker=all --command \
  "rm -rf ~/jaxsvr && tar xzf jaxsvr.tar.gz && cd ~/jaxsvr && python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[gcs]' 'jax[tpu]'"
for dir in "${data[@]}"; do
  run "${tpu[@]}" scp --recurse "$dir" "$name:jaxsvr/$(dirname "$dir")/" "${where[@]}" --worker=all
done

main=""
printf -v main '%q ' "$@"
run "${tpu[@]}" ssh "$name" "${where[@]}" --worker=all --command \
  "cd ~/jaxsvr && . .venv/bin/activate && python -m jaxsvr.main ${main% }"
