#!/usr/bin/env bash
# The field's methods head to head on Fashion-MNIST at epsilon = 1 and 10 (delta = 1e-5), each at its
# CPU-scale recipe, every noise multiplier calibrated by one accountant (PRV; RDP reported), in one
# privdiff compare report with each run's training CPU-hours beside its scores:
#   dpdm         DPDM alone                        examples/recipes/dpdm_quickstart.toml
#   dpldm        DP-LDM                            examples/recipes/dpldm_quickstart.toml
#   dpfeta       DP-FETA (the quickstart)          examples/recipes/quickstart.toml
#   privimage    PrivImage                         examples/recipes/privimage_fmnist_eps10.toml
#   privimage-e  PrivImage+e                       examples/recipes/privimage_e_fmnist_eps10.toml
#   privimage-pictograms  PrivImage on pictograms  examples/recipes/privimage_pictograms_fmnist_eps10.toml
#   pe           Private Evolution                 examples/recipes/pe_fmnist_eps1.toml
#   pe-selected  PE on PrivImage's selection       examples/recipes/pe_selected_fmnist_eps1.toml
#   pe-pictograms  PE on clothing pictograms       examples/recipes/pe_pictograms_fmnist_eps1.toml
# Each is trained (public stages included), then scored on SAMPLES images: the trained models'
# samples, and for Private Evolution the synthetic set it released. docs/methods/README.md has the
# result and what differs from DPImageBench's protocol.
#   examples/compare/head_to_head.sh [OUT_DIR] [EPSILONS] [METHODS]
#     (defaults: runs/head-to-head, "1 10", all nine; about 2 hours per epsilon on the slow 2-core kind)
# Environment: PRIVDIFF (default build/bin/privdiff), SAMPLES (per run, default 1000), EPOCHS
# (classifier epochs, default 10). Finished runs are kept; interrupted ones are resumed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-runs/head-to-head}
epsilons=${2:-"1 10"}
methods=${3:-"dpdm dpldm dpfeta privimage privimage-e privimage-pictograms pe pe-selected pe-pictograms"}
source examples/compare/runs.sh

recipe_of() {
  case $1 in
    dpdm) echo examples/recipes/dpdm_quickstart.toml ;;
    dpldm) echo examples/recipes/dpldm_quickstart.toml ;;
    dpfeta) echo examples/recipes/quickstart.toml ;;
    privimage) echo examples/recipes/privimage_fmnist_eps10.toml ;;
    privimage-e) echo examples/recipes/privimage_e_fmnist_eps10.toml ;;
    privimage-pictograms) echo examples/recipes/privimage_pictograms_fmnist_eps10.toml ;;
    pe) echo examples/recipes/pe_fmnist_eps1.toml ;;
    pe-selected) echo examples/recipes/pe_selected_fmnist_eps1.toml ;;
    pe-pictograms) echo examples/recipes/pe_pictograms_fmnist_eps1.toml ;;
    *) echo "head_to_head.sh: unknown method '$1'" >&2; exit 2 ;;
  esac
}

runs=()
for eps in $epsilons; do
  for method in $methods; do
    name="$method-eps$eps"
    train "$name" "$(recipe_of "$method")" --set privacy.epsilon="$eps" \
      --set 'privacy.accountant="prv"' --set 'privacy.report=["rdp"]'
    case $method in
      pe*) evaluate_release "$out/$name" evolve ;;
      *) evaluate "$out/$name" ;;
    esac
    runs+=("$out/$name")
  done
done
"$privdiff" compare "${runs[@]}" --out "$out/report" --force
