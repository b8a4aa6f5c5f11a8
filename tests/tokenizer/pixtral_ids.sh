#!/usr/bin/env bash
# pixtral_ids.sh — expected ids for the pixtral test vocabulary from llama.cpp's llama-tokenize
# (a binary the caller built elsewhere; nothing of llama.cpp is kept here but the ids it prints).
#   bash tests/tokenizer/pixtral_ids.sh LLAMA_TOKENIZE CASE_DIR OUT.jsonl [VOCAB.gguf]
# One {"text", "ids"} line per case file of CASE_DIR (gen_pixtral.mjs writes them), special tokens
# parsed and BOS added as the vocabulary says (llama-tokenize's defaults), escapes kept as written.
set -eu
LT=$1 DIR=$2 OUTF=$3
VOCAB=${4:-$(dirname "$0")/../fixtures/tokenizer/pixtral-vocab.gguf}
: > "$OUTF"
for f in "$DIR"/*.txt; do
    ids=$("$LT" -m "$VOCAB" -f "$f" --ids --no-escape --log-disable 2>/dev/null | tail -n 1)
    python3 -c 'import json,sys; print(json.dumps({"text": open(sys.argv[1], encoding="utf-8", newline="").read(), "ids": json.loads(sys.argv[2])}, ensure_ascii=False))' "$f" "$ids" >> "$OUTF"
done
wc -l < "$OUTF"
