#!/usr/bin/env bash
# test_readme_flags.sh — the README's flag tables (the section "Options shared by ...": the shared
# options and the llama.cpp compatibility flags) and the commands' --help say the same: every flag
# of those tables is accepted by a command's --help, and every flag that `run --help` lists under
# its shared groups (model and context, GPU and expert placement, and any group after them) has a
# row there. The tables are edited by hand; this keeps them true.
# Prints the harness format: one "name ... ok|FAIL" line per case, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
H=./hmoe
pass=0; fail=0
check() { # check NAME STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "$1 ... ok"; pass=$((pass + 1)); else echo "$1 ... FAIL: $3"; fail=$((fail + 1)); fi
}

# The tables: every table row from that heading to the next heading; flags are the backticked
# words of the first column that start with '-' (their argument names dropped).
table=$(awk '/^### Options shared by/ {on = 1; next} on && /^#/ {exit} on && /^\|/ {print}' README.md)
[ -n "$table" ]
check "README has the shared-options table" $? "no '### Options shared by' table in README.md"
readme_flags=$(printf '%s\n' "$table" | sed 's/\\|//g' | awk -F'|' '$2 !~ /^ *(flag|-+) *$/ {print $2}' | grep -oE '`-[^` ]+' | tr -d '`' | sort -u)

helps=""
for c in run chat logits bench; do helps="$helps$($H "$c" --help 2>&1)"$'\n'; done
missing=""
for f in $readme_flags; do
    printf '%s\n' "$helps" | grep -qE "(^|[ ,])$(printf '%s' "$f" | sed 's/[][\.|$^*+?(){}]/\\&/g')([ ,=]|$)" || missing="$missing $f"
done
check "every flag of the README table is in a command's --help ($(echo $readme_flags | wc -w) flags)" \
    $([ -z "$missing" ]; echo $?) "not in --help:$missing"

# run --help: the groups from "model and context:" on are the shared options.
shared=$($H run --help 2>&1 | awk '/^model and context:/ {on = 1} on' | grep -E '^  -' |
         grep -oE '^  [^ ].*' | sed -E 's/   .*//' | grep -oE '(^|[ ,])-[-a-zA-Z0-9]+' | tr -d ' ,' | sort -u)
undocumented=""
for f in $shared; do
    case "$f" in -h|--help) continue;; esac
    printf '%s\n' "$readme_flags" | grep -qxF -- "$f" || undocumented="$undocumented $f"
done
check "every shared flag of run --help has a row in the README table ($(echo $shared | wc -w) flags)" \
    $([ -z "$undocumented" ]; echo $?) "not in README:$undocumented"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
