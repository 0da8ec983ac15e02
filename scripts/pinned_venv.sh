# Sourced by the fixture scripts: pinned_venv NAME PINS makes (or keeps) the virtual environment
# ${PRIVDIFF_CACHE:-~/.cache/privdiff}/NAME holding the packages pinned in the requirements file
# PINS, rebuilt only when the pins change, and sets $venv to it.
pinned_venv() {
  venv=${PRIVDIFF_CACHE:-$HOME/.cache/privdiff}/$1
  if ! cmp -s "$2" "$venv/pins.txt" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r "$2"
    cp "$2" "$venv/pins.txt"
  fi
}
