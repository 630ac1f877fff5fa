#!/usr/bin/env bash
# The README's TensorBoard screenshot, made from a real run of seed 002's experiment (issue 11):
# run HERE, on a Debian machine where apt works, with TensorBoard's own files packed on a machine
# that has the `tensorboard` Python package (the GPU machine: `scripts/gpu/acceptance.sh tbpack`
# writes files/tensorboard-site.tar.xz into its results tarball). Neither Debian 12 nor this
# machine's pip has TensorBoard; its dependencies and a browser come from Debian.
#
#   scripts/tensorboard-screenshot.sh tensorboard-site.tar.xz [out.png]
#
# Steps: installs the dependencies and chromium (apt), unpacks TensorBoard into a scratch folder
# on PYTHONPATH, trains seed 002's comparison at a CPU size (EfficientNet-B0, float32 batch 16
# against mixed_float16 batch 32, Adam, TensorBoard callback with histograms) with build/'s CLI,
# serves the logs with TensorBoard and screenshots the per-epoch scalars (both runs overlaid) with
# headless chromium.
# Output: docs/images/tensorboard-seed002.png (or the given path). Environment: MIXPREC (the CLI,
# default build/tools/mixprec/mixprec), EPOCHS (8), PORT (6123).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tarball=${1:?usage: scripts/tensorboard-screenshot.sh tensorboard-site.tar.xz [out.png]}
png=${2:-$root/docs/images/tensorboard-seed002.png}
cli=${MIXPREC:-$root/build/tools/mixprec/mixprec}
port=${PORT:-6123}
# Debian's interpreter: the one the apt packages below install for (a pyenv or venv python3 on
# PATH would not see them).
python=/usr/bin/python3
[[ -f "$tarball" ]] || { echo "tensorboard-screenshot: no file $tarball" >&2; exit 2; }
[[ -x "$cli" ]] || { echo "tensorboard-screenshot: no CLI at $cli (make, or set MIXPREC)" >&2; exit 2; }

apt_get=(apt-get)
[[ $(id -u) -ne 0 ]] && apt_get=(sudo apt-get)
"${apt_get[@]}" install -y --no-install-recommends python3-protobuf python3-grpcio \
  python3-werkzeug python3-markdown python3-numpy python3-absl python3-six python3-packaging \
  python3-setuptools python3-pil chromium curl >/dev/null

work=$(mktemp -d)
server=
cleanup() {
  [[ -n "$server" ]] && kill "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/site"
tar -C "$work/site" -xJf "$tarball"
export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
"$python" -c "import tensorboard; print('tensorboard-screenshot: TensorBoard', tensorboard.__version__)"

# Seed 002 at a CPU size (README, "Seed 002 as commands"): a real training run of both policies.
"$cli" compare --model efficientnet-b0 --dataset synthetic:32x32x3:100:512 --input-size 32 \
  --policies float32,mixed_float16 --batch-sizes 16,32 --epochs "${EPOCHS:-8}" \
  --validation-split 0.2 --optimizer adam --tensorboard "$work/logs/fit" --histogram-freq 1

# --load_fast=false: TensorBoard's Python reader (its Rust data server may not run here).
"$python" -m tensorboard.main --logdir "$work/logs/fit" --port "$port" --load_fast=false \
  >"$work/tensorboard.log" 2>&1 &
server=$!
for _ in $(seq 60); do
  curl -sf "http://localhost:$port/" >/dev/null && break
  sleep 1
done
curl -sf "http://localhost:$port/" >/dev/null || {
  echo "tensorboard-screenshot: TensorBoard did not start:" >&2
  cat "$work/tensorboard.log" >&2
  exit 1
}
mkdir -p "$(dirname "$png")"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1600,1100 \
  --virtual-time-budget=20000 --screenshot="$png" "http://localhost:$port/#scalars" 2>/dev/null
[[ -s "$png" ]] || { echo "tensorboard-screenshot: chromium wrote no image" >&2; exit 1; }
echo "tensorboard-screenshot: wrote $png"
