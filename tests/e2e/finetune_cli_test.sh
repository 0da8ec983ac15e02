#!/usr/bin/env bash
# Public pretraining, then private fine-tuning from it, end to end and tiny: a non-private run on
# the glyphs dataset, then privdiff params and two private runs with run.init_from (attention-only
# and LoRA) on the tiny Fashion-MNIST fixture, and a recipe with [data.public] and [data.private]
# in one run. Checks what is trained, what is carried and what the reports say.
# Usage: finetune_cli_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
model='[model]
type = "pixel_unet"
channels = 8
channel_mult = [1, 2]
num_res_blocks = 1
attention_resolutions = [14]
[sampler]
type = "edm_heun"
steps = 2'
private_stage='mechanism = "dpsgd"
train = "attention"
batch_size = 4
steps = 3
ema = 0.5'
cat > "$tmp/pretrain.toml" <<TOML
[data]
dataset = "glyphs"
characters = "ABCDEFGHIJ"
per_class = 3
cache = "$tmp/glyph-cache"
$model
[[stage]]
mechanism = "nonprivate"
batch_size = 8
steps = 2
ema = 0.5
TOML
cat > "$tmp/finetune.toml" <<TOML
[privacy]
epsilon = 5.0
delta = 1e-5
[data]
path = "$fixtures/data/tiny-fashion-mnist"
$model
[[stage]]
$private_stage
TOML
out=$("$privdiff" run "$tmp/pretrain.toml" --out "$tmp/pretrain" 2>&1) || fail "pretraining failed: $out"
[ "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["ledger"]["entries"]))' "$tmp/pretrain/privacy.json")" = 0 ] \
  || fail "public pretraining spent privacy"

out=$("$privdiff" params "$tmp/finetune.toml" 2>&1) || fail "params failed: $out"
echo "$out" | grep -q "attention .* mid_attn" || fail "params lacks the attention group: $out"
trainable=$(echo "$out" | sed -n 's/^  trainable \([0-9]*\) of \([0-9]*\) parameters$/\1/p')
total=$(echo "$out" | sed -n 's/^  trainable \([0-9]*\) of \([0-9]*\) parameters$/\2/p')
[ -n "$trainable" ] && [ "$trainable" -gt 0 ] && [ "$trainable" -lt "$total" ] || fail "params: trainable $trainable of $total"

out=$("$privdiff" run "$tmp/finetune.toml" --out "$tmp/attention" --set "run.init_from=\"$tmp/pretrain\"" 2>&1) \
  || fail "fine-tuning failed: $out"
echo "$out" | grep -q "init_from .*the source spent no privacy: nothing carried" || fail "no init_from line: $out"
python3 - "$tmp/attention" "$trainable" <<'PY' || fail "attention run reports"
import json, sys
run, trainable = sys.argv[1], int(sys.argv[2])
summary = json.load(open(run + "/summary.json"))
assert summary["model"]["trainable_parameters"] == trainable, summary["model"]
assert summary["init_from"]["carried"] is False, summary["init_from"]
assert json.load(open(run + "/init_from.json"))["reason"].startswith("the source spent no privacy")
assert json.load(open(run + "/privacy.json"))["ledger"]["entries"][0]["count"] == 3
PY

# LoRA (an adapter plugin) from the public run: the adapters are new (the source has none), only they train.
out=$("$privdiff" run "$tmp/finetune.toml" --out "$tmp/lora" --set "run.init_from=\"$tmp/pretrain\"" \
  --set 'adapter.type="lora"' --set adapter.rank=2 --set 'stage.0.train="adapter"' 2>&1) \
  || fail "LoRA fine-tuning failed: $out"
# 4 attention blocks x (qkv 16->48: 2x16 + 48x2, proj 16->16: 2x16 + 16x2) = 4 x 192 adapter parameters
echo "$out" | grep -q "trains 768 of" || fail "LoRA: expected 768 adapter parameters: $out"
echo "$out" | grep -q "adapter lora: 768 of them" || fail "LoRA: no adapter line: $out"
"$privdiff" sample "$tmp/lora" --count 10 --out "$tmp/lora-samples" > /dev/null 2>&1 || fail "sampling the LoRA run failed"
# The second adapter on the same interface: IA3 scales the same layers' outputs, one scalar per output.
out=$("$privdiff" run "$tmp/finetune.toml" --out "$tmp/ia3" --set "run.init_from=\"$tmp/pretrain\"" \
  --set 'adapter.type="ia3"' --set 'adapter.targets="qkv|proj"' --set 'stage.0.train="adapter"' 2>&1) \
  || fail "IA3 fine-tuning failed: $out"
echo "$out" | grep -q "trains 256 of" || fail "IA3: expected 4 x (48 + 16) adapter parameters: $out"
"$privdiff" sample "$tmp/ia3" --count 10 --out "$tmp/ia3-samples" > /dev/null 2>&1 || fail "sampling the IA3 run failed"
# The model key of privdiff < 0.9 is refused with where LoRA went.
out=$("$privdiff" validate "$tmp/finetune.toml" --set model.lora_rank=2 2>&1) && fail "model.lora_rank accepted"
echo "$out" | grep -q 'model.lora_rank: unknown key .lora_rank.: LoRA is an adapter plugin now; write \[adapter\] type = "lora"' \
  || fail "model.lora_rank: no pointer to [adapter]: $out"

# A private run started from a private run on the same data composes the two ledgers.
out=$("$privdiff" run "$tmp/finetune.toml" --out "$tmp/twice" --set "run.init_from=\"$tmp/attention\"" \
  --set privacy.epsilon=8.0 2>&1) || fail "second fine-tuning failed: $out"
python3 - "$tmp/twice" "$tmp/attention" <<'PY' || fail "composed ledger"
import json, sys
twice, first = (json.load(open(d + "/privacy.json")) for d in sys.argv[1:3])
assert sum(e["count"] for e in twice["ledger"]["entries"]) == 6, twice["ledger"]
assert twice["results"][0]["epsilon"] > first["results"][0]["epsilon"]
PY

# Both datasets in one recipe: the public stage spends nothing, the private one is accounted.
cat > "$tmp/both.toml" <<TOML
[privacy]
epsilon = 5.0
delta = 1e-5
[data.public]
dataset = "glyphs"
characters = "ABCDEFGHIJ"
per_class = 3
cache = "$tmp/glyph-cache"
[data.private]
path = "$fixtures/data/tiny-fashion-mnist"
$model
[[stage]]
name = "pretrain"
mechanism = "nonprivate"
data = "public"
batch_size = 8
steps = 2
[[stage]]
name = "finetune"
data = "private"
$private_stage
TOML
out=$("$privdiff" run "$tmp/both.toml" --out "$tmp/both" 2>&1) || fail "two-dataset run failed: $out"
python3 - "$tmp/both" <<'PY' || fail "two-dataset reports"
import json, sys
summary = json.load(open(sys.argv[1] + "/summary.json"))
assert [s["data"] for s in summary["stages"]] == ["public", "private"]
assert len(summary["data_use"]["private"]) == 1 and len(summary["data_use"]["public"]) == 1
assert json.load(open(sys.argv[1] + "/privacy.json"))["ledger"]["entries"][0]["count"] == 3
PY
# ... and the private data may not be named public by a later run that starts from this one.
sed -e 's/mechanism = "dpsgd"/mechanism = "nonprivate"/' -e 's/^train = "attention"//' -e 's/^\[data\]/[data]\npublic = true/' \
  "$tmp/finetune.toml" > "$tmp/leak.toml"
out=$("$privdiff" run "$tmp/leak.toml" --out "$tmp/leak" --set "run.init_from=\"$tmp/both\"" 2>&1) && fail "leak accepted"
echo "$out" | grep -q "shares 20 records with data the initial model.s run or its ancestry trained on privately (.*): it cannot be public here" || fail "leak message: $out"
[ ! -e "$tmp/leak" ] || fail "a refused run left a directory"
echo "1 passed, 0 failed"
