#!/usr/bin/env bash
# giz's help as a newcomer meets it: `giz --help`, `giz help`, `giz help COMMAND` and
# `giz COMMAND --help` print the usage on stdout and exit 0; a mistake prints it on stderr, exit 2.
set -uo pipefail
giz=$1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect STATUS STDOUT_REGEX STDERR_REGEX -- ARGS...
expect() {
  local status=$1 out_re=$2 err_re=$3; shift 4
  local out err rc
  out=$("$giz" "$@" 2>/tmp/giz_help_err.$$); rc=$?
  err=$(cat /tmp/giz_help_err.$$)
  [ "$rc" -eq "$status" ] || fail "giz $*: exit $rc, expected $status"
  [[ "$out" =~ $out_re ]] || fail "giz $*: stdout '${out:0:200}' does not match '$out_re'"
  [[ "$err" =~ $err_re ]] || fail "giz $*: stderr '${err:0:200}' does not match '$err_re'"
}

commands=(info run chat serve paint bench convert pull list rm template tokenize)
for asked in --help -h help; do
  expect 0 "^usage: giz <command>" "^$" -- "$asked"
done
for c in "${commands[@]}"; do
  [[ "$("$giz" --help)" == *"  $c "* ]] || fail "giz --help does not list $c"
  expect 0 "^usage: giz $c" "^$" -- "$c" --help
  expect 0 "^usage: giz $c" "^$" -- help "$c"
  [ "$("$giz" help "$c")" == "$("$giz" "$c" -h)" ] || fail "giz help $c differs from giz $c -h"
done
expect 0 "^gizml [0-9]+\.[0-9]+\.[0-9]+$" "^$" -- --version
expect 2 "^$" "^usage: giz <command>" --
expect 2 "^$" "unknown command 'nope'" -- nope
expect 2 "^$" "unknown command 'nope'" -- help nope
expect 2 "^$" "^usage: giz run" -- run
expect 2 "^$" "^usage: giz run" -- run smollm2  # a model and no prompt
expect 2 "^$" "^usage: giz convert" -- convert --bogus
# A KV format that is not one, named before any model is read.
expect 1 "^$" "giz serve: kv: 'x' is not a format" -- serve some-model --kv x
expect 1 "^$" "giz bench: kv: '4/3' is not a format" -- bench some-model --kv 4/3
expect 1 "^$" "giz run: kv: '9' is not a format" -- run some-model "hi" --kv 9
# giz paint's mistakes, named before any model is read: a size that is not WIDTHxHEIGHT, a cache that
# is not a number, an --edit picture that cannot be read, no prompt.
expect 1 "^$" "giz paint: --size: 'big' is not WIDTHxHEIGHT" -- paint some-folder "a fox" --size big
expect 1 "^$" "giz paint: --cache: 'x' is not a number" -- paint some-folder "a fox" --cache x
expect 1 "^$" "giz paint: --edit /nonexistent/a.png: cannot be read" -- paint some-folder "a fox" --edit /nonexistent/a.png
expect 2 "^$" "^usage: giz paint" -- paint
expect 1 "^$" "giz paint: without a MODEL folder, --dit, --text and --vae are all needed" -- paint "a fox" --dit d.safetensors
expect 1 "^$" "giz serve: --image: 'tiny' is not NAME=FOLDER" -- serve --image tiny
# Likewise a prefill budget that is neither on nor off.
expect 1 "^$" "giz serve: --prefill-budget: 'maybe' is not on or off" -- serve some-model --prefill-budget maybe
rm -f /tmp/giz_help_err.$$
[ "$failures" -eq 0 ] && echo "giz help: all checks passed"
exit $((failures > 0))
