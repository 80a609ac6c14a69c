#!/bin/sh
# emit-result.sh NAME STATUS [MESSAGE] [MS] — appends one line of the results format (Note [Results format]
# in test/README.md) to $GPUMEM_RESULTS; does nothing when it is unset. STATUS is pass, fail or skip.
[ -n "$GPUMEM_RESULTS" ] || exit 0
case "$2" in pass|fail|skip) ;; *) echo "emit-result.sh: status must be pass, fail or skip, not '$2'" >&2; exit 2 ;; esac
# JSON string escaping for what a shell message may hold: backslash, quote, control characters as spaces.
esc() { printf '%s' "$1" | tr '\n\r\t' '   ' | sed 's/\\/\\\\/g; s/"/\\"/g'; }
layer=$(esc "${GPUMEM_RESULTS_LAYER:-unknown}")
line="{\"layer\":\"$layer\",\"name\":\"$(esc "$1")\",\"status\":\"$2\",\"ms\":${4:-0}"
[ -n "$3" ] && line="$line,\"message\":\"$(esc "$3")\""
printf '%s}\n' "$line" >> "$GPUMEM_RESULTS"
