# Sourced by the fixture scripts: compvis_source sets $compvis to a checkout of CompVis's
# latent-diffusion at the commit DP-LDM forks (its ldm/ model code only), kept in
# ${PRIVDIFF_CACHE:-~/.cache/privdiff}/compvis-src, or COMPVIS_SRC, a checkout of that commit.
# Nothing of it is copied into the project.
compvis_commit=a506df5756472e2ebaf9078affdde2c4f1502cd4  # github.com/CompVis/latent-diffusion
compvis_source() {
  compvis=${COMPVIS_SRC:-${PRIVDIFF_CACHE:-$HOME/.cache/privdiff}/compvis-src}
  if [ "$(git -C "$compvis" rev-parse HEAD 2>/dev/null)" != "$compvis_commit" ] || [ ! -d "$compvis/ldm" ]; then
    [ -n "${COMPVIS_SRC:-}" ] && { echo "COMPVIS_SRC=$compvis is not at $compvis_commit" >&2; return 1; }
    rm -rf "$compvis"
    git clone --quiet --no-checkout https://github.com/CompVis/latent-diffusion "$compvis"
    git -C "$compvis" checkout --quiet "$compvis_commit" -- ldm
  fi
}
