#!/usr/bin/env bash
# test_cli_answers.sh — the CLI's answers to input a new user gets wrong: out-of-range flag
# values are usage errors (exit 2) naming the flag and its range, whichever backend runs;
# -t above the CPU count warns and caps; directories, long paths, empty or broken
# conversations, lone surrogates and BOMs get clear answers; output that cannot be written is
# an error; the temporary bench model is removed on SIGTERM and SIGHUP; both "-n 4" and "-n=4"
# forms parse; generated control bytes print escaped on a terminal; help is grouped.
# Prints the harness format: one "name ... ok|FAIL" line per case, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
S="${HMOE_SHARED:-tests}"
M="$S/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"
H=./hmoe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { # check NAME STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "$1 ... ok"; pass=$((pass + 1)); else echo "$1 ... FAIL: $3"; fail=$((fail + 1)); fi
}
RUN="$H run -m $M -p Hello -n 2 --temp 0 -t 1 -q"

# Usage error: exit 2 and stderr naming the flag (and, with a 4th argument, containing it).
usage_case() { # usage_case NAME "ARGS" FLAG [TEXT]
    local out rc
    out=$(eval "$2" 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] && printf '%s' "$out" | grep -qF -- "$3" && { [ -z "${4:-}" ] || printf '%s' "$out" | grep -qF -- "$4"; }
    check "$1" $? "rc $rc: $out"
}

# 2. sampling values out of range
for v in "--temp nan" "--temp inf" "--top-p -1" "--top-p nan" "--min-p nan" "--min-p -0.5" \
         "--repeat-penalty 0" "--repeat-penalty -1" "--repeat-penalty nan"; do
    usage_case "cli run $v: usage error naming the flag and its range" "$RUN $v" "${v%% *}" "must be"
done
usage_case "cli chat --top-p nan: the same check" "echo hi | $H chat -m $M -t 1 --top-p nan" "--top-p" "must be"

# 5. RoPE overrides
for v in "--rope-freq-base -1" "--rope-freq-base nan" "--rope-freq-base 1" "--rope-scale -1" "--rope-scale 0" \
         "--rope-scale nan" "--yarn-orig-ctx -1" "--yarn-orig-ctx 0" "--yarn-orig-ctx 2.5" "--yarn-orig-ctx x"; do
    usage_case "cli run $v: usage error naming the flag" "$RUN $v" "${v%% *}" "must be"
done
out=$($RUN --rope-scale 4 2>&1 >/dev/null); rc=$?
[ $rc -eq 0 ] && printf '%s' "$out" | grep -q 'warning: --rope-scale 4 has no effect.*--rope-scaling'
check "cli run --rope-scale 4 without --rope-scaling on a model without scaling: a warning" $? "rc $rc: $out"
out=$($RUN --rope-scale 4 --rope-scaling linear 2>&1 >/dev/null); rc=$?
[ $rc -eq 0 ] && ! printf '%s' "$out" | grep -q 'has no effect'
check "cli run --rope-scale 4 --rope-scaling linear: no warning" $? "rc $rc: $out"

# 4. -ot rules are checked on the CPU backend too
for v in "exps" "[=CPU" "exps=TPU"; do
    usage_case "cli run -ot '$v' --gpu off: usage error" "$RUN --gpu off -ot '$v'" "-ot/--override-tensor '$v'"
done
out=$($RUN --gpu off -ot 'exps=CPU' 2>&1 >/dev/null); rc=$?
check "cli run -ot exps=CPU --gpu off: accepted" $rc "rc $rc: $out"

# 1. -t above the CPU count: warned and capped (fast), not silently 1024 threads
n_cpu=$(getconf _NPROCESSORS_ONLN)
out=$(timeout 60 $H run -m $M -p Hello -n 2 --temp 0 -q -t 10000 -v 2>&1 >/dev/null); rc=$?
[ $rc -eq 0 ] && printf '%s' "$out" | grep -q "warning: -t 10000 is more than the $n_cpu CPUs.*using $n_cpu threads" &&
    printf '%s' "$out" | grep -q " $n_cpu threads"
check "cli run -t 10000: warns and runs with the $n_cpu CPUs" $? "rc $rc: $(printf '%s' "$out" | head -n 5)"

# 7. 8. bench -r and logits --top ranges
usage_case "cli bench -r -1: usage error" "$H bench -m $M -r -1" "-r/--repetitions -1" "1..1000"
usage_case "cli bench -r 0: usage error" "$H bench -m $M -r 0" "-r/--repetitions 0" "1..1000"
usage_case "cli logits --top 0 without -o: usage error" "$H logits -m $M --ids 1,2 -t 1 --top 0" "--top 0" "1..64"
$H logits -m $M --ids 1,2 -t 1 --top 0 -o "$T/l.f32" >"$T/out" 2>&1; rc=$?
[ $rc -eq 0 ] && [ ! -s "$T/out" ] && [ "$(stat -c %s "$T/l.f32")" -eq $((2 * 4101 * 4)) ]
check "cli logits --top 0 -o FILE: only the file" $? "rc $rc: $(cat "$T/out")"

# 14. both forms of every flag, and llama.cpp's '_' spelling
a=$($RUN -n 3 2>/dev/null); b=$($H run -m $M -p Hello -n=3 --temp=0 -t=1 -q 2>/dev/null)
c=$($H run --model=$M --prompt=Hello --n-predict=3 --temp 0 --threads 1 --quiet 2>/dev/null)
d=$($H run -m $M -p Hello --n_predict 3 --temp 0 -t 1 -q 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && [ "$a" = "$d" ]
check "cli run: -n 3, -n=3, --n-predict=3 and --n_predict 3 give the same output" $? "'$a' '$b' '$c' '$d'"
usage_case "cli run -n=x: invalid integer named" "$H run -m $M -p Hello -n=x" "'x' for --n-predict"
usage_case "cli run -q=1: a flag takes no value" "$RUN -q=1" "--quiet takes no value"

# 6. directories
mkdir -p "$T/dir"
for cmd in "$H run -m $M -t 1 -f $T/dir" "$H tokenize -m $M -f $T/dir" "$H template -m $M -i $T/dir" \
           "$H logits -m $M --ids-file $T/dir"; do
    out=$($cmd 2>&1 >/dev/null); rc=$?
    [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "$T/dir: is a directory"
    check "cli ${cmd#$H } : 'is a directory'" $? "rc $rc: $out"
done
out=$(printf '/load %s\n' "$T/dir" | $H chat -m $M -t 1 -n 2 --temp 0 2>&1)
printf '%s' "$out" | grep -q "$T/dir: is a directory"
check "cli chat /load DIR: 'is a directory'" $? "$out"

# 9. a long path does not hide the reason
long="$T/$(printf 'abcdefgh/%.0s' $(seq 1 70))model.gguf"
out=$($H run -m "$long" -p Hello 2>&1); rc=$?
[ $rc -eq 1 ] && printf '%s' "$out" | grep -q 'No such file or directory' && printf '%s' "$out" | grep -q 'model.gguf'
check "cli run -m <640-byte path>: the reason and the file name survive" $? "rc $rc: $out"

# 10. chat /load: an empty conversation or a message without content is refused, the current one kept
printf '{"messages": []}' > "$T/empty.json"
printf '{"messages": [{"role": "user"}]}' > "$T/nocontent.json"
printf '{"messages": [{"role": "narrator", "content": "x"}]}' > "$T/role.json"
out=$(printf 'Hello\n/load %s\n/load %s\n/load %s\n/save %s\n' "$T/empty.json" "$T/nocontent.json" "$T/role.json" \
      "$T/saved.json" | $H chat -m $M -t 1 -n 2 --temp 0 2>&1)
printf '%s' "$out" | grep -q 'empty.json: "messages" is empty; nothing loaded' &&
    printf '%s' "$out" | grep -q 'nocontent.json: message 0 (user) has no "content"' &&
    printf '%s' "$out" | grep -q "role.json: message 0 has role 'narrator'; hmoe chat keeps messages whose role is system, user or assistant" &&
    [ "$(grep -o '"role"' "$T/saved.json" | wc -l)" -eq 2 ]
check "cli chat /load of an empty or broken conversation: refused, the conversation kept" $? "$out $(cat "$T/saved.json" 2>/dev/null)"

# 11. template: lone surrogates become U+FFFD; a BOM is skipped
printf '{"messages": [{"role": "user", "content": "a\\ud800b\\udc00c"}]}' > "$T/sur.json"
$H template -m $M -i "$T/sur.json" > "$T/sur.out" 2>&1; rc=$?
[ $rc -eq 0 ] && iconv -f UTF-8 -t UTF-8 "$T/sur.out" >/dev/null 2>&1 && grep -q "a$(printf '\xef\xbf\xbd')b$(printf '\xef\xbf\xbd')c" "$T/sur.out"
check "cli template: lone surrogates render as U+FFFD (valid UTF-8)" $? "rc $rc: $(od -c "$T/sur.out" | head -n 3)"
printf '\xef\xbb\xbf{"messages": [{"role": "user", "content": "Hello!"}]}' > "$T/bom.json"
out=$($H template -m $M -i "$T/bom.json" 2>&1); rc=$?
[ $rc -eq 0 ] && printf '%s' "$out" | grep -q 'Hello!'
check "cli template: a UTF-8 BOM before the JSON is skipped" $? "rc $rc: $out"

# 13. stdout that cannot be written
for fmt in md json jsonl csv; do
    out=$($H bench -m $M -p 4 -n 2 -r 1 -t 1 -q -o $fmt 2>&1 >/dev/full); rc=$?
    [ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'cannot write the output to standard output'
    check "cli bench -o $fmt > /dev/full: an error" $? "rc $rc: $out"
done
out=$($H logits -m $M --ids 1,2 -t 1 2>&1 >/dev/full); rc=$?
[ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'cannot write the output to standard output'
check "cli logits > /dev/full: an error" $? "rc $rc: $out"
out=$($RUN 2>&1 >/dev/full); rc=$?
[ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'cannot write the output to standard output: No space left'
check "cli run > /dev/full: an error" $? "rc $rc: $out"

# 12. SIGTERM / SIGHUP during bench without -m remove the temporary model
for sig in TERM HUP INT; do
    mkdir -p "$T/tmp$sig"
    TMPDIR="$T/tmp$sig" $H bench -p 512 -n 512 -r 1000 -t 1 -q >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do [ -n "$(ls -A "$T/tmp$sig")" ] && break; sleep 0.1; done
    had=$(ls -A "$T/tmp$sig" | wc -l)
    sleep 0.5
    kill -$sig $pid 2>/dev/null
    wait $pid 2>/dev/null
    [ "$had" -ge 1 ] && [ -z "$(ls -A "$T/tmp$sig")" ]
    check "cli bench (synthetic) killed with SIG$sig: the temporary model is removed" $? "had $had, left: $(ls -A "$T/tmp$sig")"
done

# 15. on a terminal, control bytes and broken UTF-8 of the output print escaped; through a pipe raw
printf 'a\x0eb\x1b[31mc\xffd\xe2\x82\xace\n' > "$T/ctl.txt"
script -qec "$H run -m $M -f $T/ctl.txt -n 1 --temp 0 -t 1 -q" /dev/null > "$T/tty.out" 2>&1
grep -qF 'a\x0Eb\x1B[31mc\xFFd' "$T/tty.out" && grep -q "$(printf '\xe2\x82\xac')e" "$T/tty.out" && ! grep -q "$(printf '\x0e')" "$T/tty.out"
check "cli run on a terminal: control bytes and invalid UTF-8 escaped, valid UTF-8 kept" $? "$(od -c "$T/tty.out" | head -n 4)"
$H run -m $M -f "$T/ctl.txt" -n 1 --temp 0 -t 1 -q 2>/dev/null | head -c 9 > "$T/pipe.out"
cmp -s "$T/pipe.out" <(head -c 9 "$T/ctl.txt")
check "cli run through a pipe: the bytes as they are" $? "$(od -c "$T/pipe.out")"

# 16. help: the command's own flags first, then sampling, model and GPU groups; -ot on its own line
help=$($H run --help)
ln() { printf '%s\n' "$help" | grep -n -- "$1" | head -n 1 | cut -d: -f1; }
[ "$(ln '^  -p, --prompt')" -lt "$(ln '^sampling:')" ] && [ "$(ln '^sampling:')" -lt "$(ln '^model and context:')" ] &&
    [ "$(ln '^model and context:')" -lt "$(ln '^GPU and expert placement:')" ] &&
    printf '%s\n' "$help" | grep -q '^  -ot, --override-tensor REGEX=CPU|GPU$'
check "cli run --help: grouped by topic, run's flags first" $? "$help"
for c in chat logits bench; do
    h=$($H $c --help)
    printf '%s\n' "$h" | grep -q '^GPU and expert placement:$'
    check "cli $c --help: has the GPU group heading" $? "$(printf '%s\n' "$h" | head -n 5)"
done

# --version
out=$($H --version); rc=$?
[ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qE '^version: [0-9]+ \(([0-9a-f]{12}(-dirty)?|unknown)\)$' &&
    printf '%s\n' "$out" | grep -qE '^built with CUDA (on|off).*(gcc|cc|clang)'
check "cli --version: commit and build options" $? "rc $rc: $out"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
