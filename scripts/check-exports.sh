#!/usr/bin/env bash
# Asserts that a shared libmixprec exports the public API and nothing else:
#  - its SONAME is libmixprec.so.MAJOR.MINOR (the version of mixprec/version.h next to it, if given);
#  - the dynamic symbol table (nm -D --defined-only) has the public API (mixprec::version(),
#    Tensor, Dense, Model::fit, LossScaleOptimizer);
#  - and no third-party symbol (oneDNN, zlib, nlohmann-json, OpenMP, CLI11, CUDA libraries) and no
#    internal one: nothing in mixprec::cpu::, in mixprec::cuda:: only what mixprec/cuda.h declares,
#    and in a ...::detail:: namespace only the names a public header declares (float16.h's inline conversions, the pimpl types).
# Usage: scripts/check-exports.sh path/to/libmixprec.so [path/to/include/mixprec/version.h]
set -euo pipefail
lib=${1:?usage: check-exports.sh libmixprec.so [version.h]}
version_h=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
failures=0
fail() { echo "check-exports: $*"; failures=$((failures + 1)); }

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [[ -n $version_h ]]; then
  major=$(sed -n 's/^#define MIXPREC_VERSION_MAJOR \([0-9]*\)/\1/p' "$version_h")
  minor=$(sed -n 's/^#define MIXPREC_VERSION_MINOR \([0-9]*\)/\1/p' "$version_h")
  [[ $soname == "libmixprec.so.$major.$minor" ]] || fail "SONAME is '$soname', expected libmixprec.so.$major.$minor"
else
  [[ $soname =~ ^libmixprec\.so\.[0-9]+\.[0-9]+$ ]] || fail "SONAME is '$soname', expected libmixprec.so.MAJOR.MINOR"
fi

symbols=$(nm -D --defined-only -C "$lib" | cut -d' ' -f3-)
count=$(wc -l <<<"$symbols")

for needed in 'mixprec::version()' 'mixprec::Tensor::' 'mixprec::layers::Dense::Dense(' \
              'mixprec::Model::fit(' 'mixprec::mixed_precision::LossScaleOptimizer::'; do
  grep -qF "$needed" <<<"$symbols" || fail "the public API symbol '$needed...' is not exported"
done

third_party=$(grep -Ei 'dnnl|nlohmann|CLI::|GOMP|omp_|cublas|cudnn|cudart|^cuda[A-Z]|__cuda|^(deflate|inflate|gz|crc32|adler32|compress|uncompress|zlib)' <<<"$symbols" || true)
[[ -z $third_party ]] || fail "third-party symbols exported:"$'\n'"$(head -20 <<<"$third_party")"

prefix='^((typeinfo|typeinfo name|vtable|VTT|guard variable|construction vtable) for )?'
internal=$(grep -E "${prefix}mixprec::cpu::" <<<"$symbols" || true)
[[ -z $internal ]] || fail "CPU backend internals exported:"$'\n'"$(head -20 <<<"$internal")"

# mixprec::cuda:: is both a public namespace (include/mixprec/cuda.h: device_count, synchronize...)
# and the CUDA backend's: only the names cuda.h and cuda_graph.h declare may be exported.
while IFS= read -r name; do
  [[ -z $name ]] && continue
  grep -qw -- "$name" "$root/include/mixprec/cuda.h" "$root/include/mixprec/cuda_graph.h" ||
    fail "CUDA backend internal exported (not declared in mixprec/cuda.h): mixprec::cuda::$name"
done < <(grep -E "${prefix}mixprec::cuda::" <<<"$symbols" |
           sed -E "s/${prefix}//; s/^mixprec::cuda::([A-Za-z_0-9]+).*/\1/" | sort -u)

# detail:: names: allowed only when a public header declares them.
while IFS= read -r name; do
  [[ -z $name ]] && continue
  grep -rqw -- "$name" "$root/include/mixprec" ||
    fail "internal detail symbol exported (not in a public header): $name"
done < <(grep -E "${prefix}mixprec::([a-z_]+::)*detail::" <<<"$symbols" |
           sed -E "s/${prefix}//; s/^.*detail::([A-Za-z_0-9]+).*/\1/" | sort -u)

if [[ $failures -ne 0 ]]; then
  echo "check-exports: FAILED ($lib, $count symbols)"
  exit 1
fi
echo "check-exports: $lib ($soname): $count symbols, public API only"
